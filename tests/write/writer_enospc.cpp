// ENOSPC test for the writer on a real full filesystem: a 2 MiB tmpfs mounted
// in a temporary directory (needs root; exits 77 = skipped when the mount is
// refused). Exit 0 = pass, 1 = fail.
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "ringsafe/writer.hpp"
#include "written_file.hpp"

using namespace ringsafe;
namespace fs = std::filesystem;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
    if (!ok) {
        std::fprintf(stderr, "FAIL: %s\n", what.c_str());
        ++failures;
    }
}

// Runs `f`, expecting an ENOSPC error that names `tensor` and, as its message
// and error::path() do, the file `target`.
template <class F>
void expect_enospc(const char* label, const std::string& tensor, const fs::path& target, F&& f) {
    try {
        f();
        expect(false, std::string(label) + ": no error on a full filesystem");
    } catch (const error& e) {
        std::string msg = e.what();
        expect(e.code() == std::error_code(ENOSPC, std::system_category()), std::string(label) + ": got " + msg);
        expect(msg.find("tensor '" + tensor + "'") != std::string::npos, std::string(label) + ": message " + msg);
        expect(msg.find(target.string()) != std::string::npos, std::string(label) + ": message " + msg);
        expect(e.path() == target.string(), std::string(label) + ": path() is '" + e.path() + "'");
    }
}

}  // namespace

int main() {
    ringsafe::test::temp_dir d;
    auto mnt = d / "small";
    fs::create_directory(mnt);
    if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=2m") != 0) {
        std::fprintf(stderr, "skip: cannot mount a tmpfs (%s)\n", std::strerror(errno));
        return 77;
    }
    auto target = mnt / "out.safetensors";
    auto chunk = ringsafe::test::pattern(1 << 20, 1);
    expect_enospc("streaming", "big", target, [&] {
        writer w(target.string());
        w.add("small", dtype::U8, {1000}, std::span(chunk).first(1000));
        w.begin("big", dtype::U8, {4u << 20});
        for (int i = 0; i < 4; ++i) w.append(chunk);
        w.end();
        w.finish();
    });
    expect(!fs::exists(target), "streaming: a file exists at the target");
    expect(ringsafe::test::dir_entries(mnt).empty(), "streaming: a temporary was left behind");

    expect_enospc("declared", "second", target, [&] {
        declared_writer w(target.string(), {{"first", dtype::U8, {1u << 20}}, {"second", dtype::U8, {3u << 20}}});
        w.write("first", 0, chunk);
        for (int i = 0; i < 3; ++i) w.write("second", std::uint64_t(i) << 20, chunk);
        w.finish();
    });
    expect(!fs::exists(target), "declared: a file exists at the target");
    expect(ringsafe::test::dir_entries(mnt).empty(), "declared: a temporary was left behind");

    // ringsafe cp onto the full filesystem: exit 1, the kind and OUT named, nothing left.
    {
        auto src = d / "src.safetensors";
        {
            writer w(src.string());
            w.begin("big", dtype::U8, {4u << 20});
            for (int i = 0; i < 4; ++i) w.append(chunk);
            w.end();
            w.finish();
        }
        auto r = ringsafe::test::run_command(ringsafe::test::cli_path() + " cp --no-sync '" + src.string() + "' '" +
                                             target.string() + "' 2>&1");
        expect(r.status == 1, "cp: exit status " + std::to_string(r.status));
        expect(r.out.find("IoError") != std::string::npos && r.out.find(target.string()) != std::string::npos,
               "cp: output " + r.out);
        expect(!fs::exists(target) && ringsafe::test::dir_entries(mnt).empty(), "cp: something was left behind");
    }

    // The filesystem is usable again afterwards: a small file fits.
    {
        writer w(target.string());
        w.add("small", dtype::U8, {1000}, std::span(chunk).first(1000));
        w.finish();
    }
    expect(ringsafe::test::written_file(target).tensor("small").size() == 1000, "small file after the failures");
    ::umount(mnt.c_str());
    std::printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
