// Header JSON -> tensor table, with Boost.JSON's event parser (no DOM).
//
// The handler mirrors how the reference (serde_json into
// HashMetadata { __metadata__: Option<HashMap<String,String>>, flatten tensors })
// maps the header: a top-level object; `__metadata__` is null or an object of
// strings (at most once); every other key is a tensor entry, either an object
// with dtype/shape/data_offsets (each exactly once, unknown fields ignored)
// or the array [dtype, shape, data_offsets]; a dtype is a name or {"NAME": null};
// numbers must be plain non-negative integers that fit in 64 bits.
#include "format/safetensors/header_json.hpp"

#include <boost/json/basic_parser_impl.hpp>

#include <cmath>
#include <cstdint>
#include <string>

#include "format/safetensors/header_schema.hpp"

namespace ringsafe::format {
namespace {

namespace json = boost::json;

// A key or string the parser may deliver in parts (long or escaped text).
// Text that arrives whole is used in place, without a copy.
class joined_text {
public:
    void part(json::string_view s) { buf_.append(s.data(), s.size()), parts_ = true; }
    std::string_view finish(json::string_view s) {
        if (!parts_) return {s.data(), s.size()};
        buf_.append(s.data(), s.size());
        return buf_;
    }
    void reset() {
        if (parts_) buf_.clear(), parts_ = false;
    }

private:
    std::string buf_;
    bool parts_ = false;
};

// The whole text of a number, which the parser may deliver in parts; the
// parts are dropped when it goes out of scope.
class number_text {
public:
    number_text(joined_text& parts, json::string_view last) : parts_(parts), text_(parts.finish(last)) {}
    ~number_text() { parts_.reset(); }
    number_text(const number_text&) = delete;
    number_text& operator=(const number_text&) = delete;
    operator std::string_view() const noexcept { return text_; }

private:
    joined_text& parts_;
    std::string_view text_;
};

class handler {
public:
    static constexpr std::size_t max_array_size = static_cast<std::size_t>(-1);
    static constexpr std::size_t max_object_size = static_cast<std::size_t>(-1);
    static constexpr std::size_t max_string_size = static_cast<std::size_t>(-1);
    static constexpr std::size_t max_key_size = static_cast<std::size_t>(-1);

    explicit handler(header& out) : out_(out) {}

    const std::string& message() const noexcept { return message_; }

    bool on_document_begin(json::error_code&) { return true; }
    bool on_document_end(json::error_code&) { return true; }
    bool on_comment_part(json::string_view, json::error_code&) { return true; }
    bool on_comment(json::string_view, json::error_code&) { return true; }
    bool on_number_part(json::string_view s, json::error_code&) { return num_.part(s), true; }

    bool on_object_begin(json::error_code& ec) {
        if (skip_) return ++skip_, true;
        switch (slot s = next_slot()) {
            case slot::root: return push(frame_kind::top, ec);
            case slot::meta: out_.metadata.emplace(); return push(frame_kind::meta, ec);
            case slot::entry: fields_ = 0; return push(frame_kind::entry_obj, ec);
            case slot::dtype: return push(frame_kind::dtype_obj, ec);
            case slot::dtype_null: return push(frame_kind::unit_obj, ec);  // serde takes {} as unit too
            case slot::ignored: skip_ = 1; return true;
            default: return wrong_type(s, "an object", ec);
        }
    }

    bool on_object_end(std::size_t, json::error_code& ec) {
        if (skip_) return --skip_, true;
        const frame& f = stack_[depth_ - 1];
        if (f.kind == frame_kind::entry_obj && fields_ != field_all) {
            const char* missing = !(fields_ & field_dtype)   ? "dtype"
                                  : !(fields_ & field_shape) ? "shape"
                                                             : "data_offsets";
            return fail(ec, "tensor '" + current().name + "' has no " + missing + " field");
        }
        if (f.kind == frame_kind::dtype_obj && f.count != 1)
            return fail(ec, "tensor '" + current().name +
                                "' dtype object must have exactly one key (the dtype name)");
        --depth_;
        return true;
    }

    bool on_array_begin(json::error_code& ec) {
        if (skip_) return ++skip_, true;
        switch (slot s = next_slot()) {
            case slot::entry: fields_ = field_all; return push(frame_kind::entry_arr, ec);
            case slot::shape: dims_.clear(); return push(frame_kind::shape, ec);
            case slot::offsets: return push(frame_kind::offsets, ec);
            case slot::ignored: skip_ = 1; return true;
            default: return wrong_type(s, "an array", ec);
        }
    }

    bool on_array_end(std::size_t, json::error_code& ec) {
        if (skip_) return --skip_, true;
        const frame& f = stack_[depth_ - 1];
        if (f.kind == frame_kind::entry_arr && f.count != 3)
            return fail(ec, "tensor '" + current().name + "' entry array has " +
                                std::to_string(f.count) + " items, expected 3");
        if (f.kind == frame_kind::offsets && f.count != 2)
            return fail(ec, "tensor '" + current().name + "' data_offsets has " +
                                std::to_string(f.count) + " items, expected 2");
        if (f.kind == frame_kind::shape) current().shape.assign(dims_.begin(), dims_.end());
        --depth_;
        return true;
    }

    bool on_key_part(json::string_view s, std::size_t, json::error_code&) {
        if (!skip_) key_.part(s);
        return true;
    }

    bool on_key(json::string_view s, std::size_t, json::error_code& ec) {
        if (skip_) return true;
        bool ok = take_key(key_.finish(s), ec);
        key_.reset();
        return ok;
    }

    bool on_string_part(json::string_view s, std::size_t, json::error_code&) {
        if (!skip_) str_.part(s);
        return true;
    }

    bool on_string(json::string_view s, std::size_t, json::error_code& ec) {
        if (skip_) return true;
        bool ok = take_string(str_.finish(s), ec);
        str_.reset();
        return ok;
    }

    bool on_int64(std::int64_t i, json::string_view last, json::error_code& ec) {
        const number_text text(num_, last);
        if (skip_) return true;
        // `-0` arrives as int64 0; the reference reads it as a float and refuses it.
        const std::string_view t = text;
        bool negative = i < 0 || (!t.empty() && t.front() == '-');
        return take_integer(static_cast<std::uint64_t>(i), negative, text, ec);
    }

    bool on_uint64(std::uint64_t u, json::string_view last, json::error_code& ec) {
        const number_text text(num_, last);
        if (skip_) return true;
        return take_integer(u, false, text, ec);
    }

    bool on_double(double d, json::string_view last, json::error_code& ec) {
        const number_text text(num_, last);
        // serde_json refuses numbers beyond the f64 range anywhere, even in ignored fields.
        if (!std::isfinite(d)) return fail(ec, "number " + std::string(text) + " is out of range");
        if (skip_) return true;
        slot s = next_slot();
        if (s == slot::ignored) return true;
        if (s == slot::dim || s == slot::offset)
            return fail(ec, "tensor '" + current().name + "': " + std::string(text) +
                                " is not an unsigned 64-bit integer");
        return wrong_type(s, "a number", ec);
    }

    bool on_bool(bool, json::error_code& ec) {
        if (skip_) return true;
        slot s = next_slot();
        return s == slot::ignored || wrong_type(s, "a boolean", ec);
    }

    bool on_null(json::error_code& ec) {
        if (skip_) return true;
        slot s = next_slot();
        if (s == slot::ignored || s == slot::dtype_null) return true;
        if (s == slot::meta) return true;  // `__metadata__: null` means no metadata
        return wrong_type(s, "null", ec);
    }

private:
    struct frame {
        frame_kind kind;
        std::uint32_t count;  // items seen (arrays) or keys seen (dtype object)
    };

    tensor_info& current() noexcept { return out_.tensors.back(); }

    bool push(frame_kind k, json::error_code& ec) {
        // Deeper frames are never needed: anything below a tensor entry's
        // fields is either refused or skipped.
        if (depth_ == std::size(stack_)) return fail(ec, "header nested too deeply");
        stack_[depth_++] = frame{k, 0};
        return true;
    }

    // Meaning of the value that starts now. In objects it was set by the key;
    // in arrays it follows from the position.
    slot next_slot() noexcept {
        if (depth_ == 0) return slot::root;
        frame& f = stack_[depth_ - 1];
        switch (f.kind) {
            case frame_kind::shape: ++f.count; return slot::dim;
            case frame_kind::offsets: return f.count++ < 2 ? slot::offset : slot::excess;
            case frame_kind::entry_arr:
                switch (f.count++) {
                    case 0: return slot::dtype;
                    case 1: return slot::shape;
                    case 2: return slot::offsets;
                    default: return slot::excess;
                }
            default: return slot_;
        }
    }

    bool take_key(std::string_view key, json::error_code& ec) {
        frame& f = stack_[depth_ - 1];
        switch (f.kind) {
            case frame_kind::top:
                if (key == "__metadata__") {
                    if (meta_seen_) return fail(ec, "__metadata__ appears twice");
                    meta_seen_ = true;
                    slot_ = slot::meta;
                    in_tensor_ = false;
                } else {
                    out_.tensors.emplace_back().name.assign(key);
                    slot_ = slot::entry;
                    in_tensor_ = true;
                }
                return true;
            case frame_kind::meta:
                meta_key_.assign(key);
                slot_ = slot::meta_value;
                return true;
            case frame_kind::entry_obj: {
                unsigned bit = 0;
                if (key == "dtype") bit = field_dtype, slot_ = slot::dtype;
                else if (key == "shape") bit = field_shape, slot_ = slot::shape;
                else if (key == "data_offsets") bit = field_offsets, slot_ = slot::offsets;
                else return slot_ = slot::ignored, true;
                if (fields_ & bit)
                    return fail(ec, "tensor '" + current().name + "' has the field " +
                                        std::string(key) + " twice");
                fields_ |= bit;
                return true;
            }
            case frame_kind::dtype_obj:
                if (f.count++ != 0)
                    return fail(ec, "tensor '" + current().name +
                                        "' dtype object must have exactly one key");
                slot_ = slot::dtype_null;
                return set_dtype(key, ec);
            case frame_kind::unit_obj: return wrong_type(slot::dtype_null, "a non-empty object", ec);
            default: return fail(ec, "unexpected key");  // arrays have no keys
        }
    }

    bool take_string(std::string_view str, json::error_code& ec) {
        switch (slot s = next_slot()) {
            case slot::meta_value: out_.metadata->insert_or_assign(meta_key_, std::string(str)); return true;
            case slot::dtype: return set_dtype(str, ec);
            case slot::ignored: return true;
            default: return wrong_type(s, "a string", ec);
        }
    }

    bool take_integer(std::uint64_t v, bool negative, std::string_view text, json::error_code& ec) {
        slot s = next_slot();
        if (s == slot::ignored) return true;
        if (s != slot::dim && s != slot::offset) return wrong_type(s, "a number", ec);
        if (negative)
            return fail(ec, "tensor '" + current().name + "': " + std::string(text) +
                                " is not an unsigned integer");
        if (s == slot::dim) dims_.push_back(v);
        else if (stack_[depth_ - 1].count == 1) current().begin = v;
        else current().end = v;
        return true;
    }

    bool set_dtype(std::string_view name, json::error_code& ec) {
        // Neighbouring entries usually share a dtype (writers group by dtype).
        if (name != dtype_name(last_dtype_)) {
            auto t = dtype_from_name(name);
            if (!t) return fail(ec, "tensor '" + current().name + "' has unknown dtype '" + std::string(name) + "'");
            last_dtype_ = *t;
        }
        current().dtype = last_dtype_;
        return true;
    }

    bool wrong_type(slot s, const char* found, json::error_code& ec) {
        std::string where = in_tensor_ ? " in tensor '" + current().name + "'" : std::string();
        if (s == slot::excess)
            return fail(ec, (stack_[depth_ - 1].kind == frame_kind::offsets ? "data_offsets has more than 2 items"
                                                                           : "a tensor entry array has more than 3 items") +
                                where);
        return fail(ec, std::string("expected ") + slot_what(s) + ", found " + found + where);
    }

    bool fail(json::error_code& ec, std::string msg) {
        message_ = std::move(msg);
        ec = json::error::syntax;  // any code: the message above is what is reported
        return false;
    }

    header& out_;
    frame stack_[4] = {};
    std::size_t depth_ = 0;
    std::size_t skip_ = 0;  // nesting inside an ignored value
    slot slot_ = slot::root;
    unsigned fields_ = 0;  // dtype/shape/data_offsets seen in the current entry
    bool meta_seen_ = false;
    bool in_tensor_ = false;  // the current top-level value is a tensor entry
    dtype last_dtype_ = dtype::F32;
    joined_text key_, str_, num_;
    std::string meta_key_;
    std::vector<std::uint64_t> dims_;
    std::string message_;
};

}  // namespace

struct header_json::impl {
    impl(header& out, const json::parse_options& o) : parser(o, out) {}
    json::basic_parser<handler> parser;
    std::uint64_t fed = 0;  // bytes before the current piece
    bool ended = false;     // the object is complete; only whitespace may follow
};

namespace {

json::parse_options parser_options() {
    json::parse_options opts;
    opts.max_depth = max_json_depth;
    opts.allow_invalid_utf8 = true;  // the caller checks the UTF-8 of all N bytes itself
    return opts;
}

}  // namespace

header_json::header_json(header& out, std::uint64_t size) : p_(std::make_unique<impl>(out, parser_options())) {
    // Every tensor entry takes at least min_entry_bytes of JSON, so this bounds
    // the table of any header in the usual form. Reserving address space is
    // free; growing by doubling would copy the table and, for a moment, hold
    // it twice.
    out.tensors.reserve(static_cast<std::size_t>(size / min_entry_bytes));
}

header_json::~header_json() = default;

bool header_json::feed(std::string_view text, status& st) {
    json::error_code ec;
    std::size_t at = 0;
    if (!p_->ended) {
        at = p_->parser.write_some(true, text.data(), text.size(), ec);
        p_->ended = !ec && p_->parser.done();
    }
    if (!ec && p_->ended && at < text.size()) {
        // The parser stops after the object; only JSON whitespace may follow it.
        at = text.find_first_not_of(" \t\n\r", at);
        if (at != std::string_view::npos) ec = json::error::extra_data;
    }
    if (!ec) {
        p_->fed += text.size();
        return true;
    }
    return failed(ec, p_->fed + at, st);
}

bool header_json::finish(status& st) {
    if (p_->ended) return true;
    json::error_code ec;
    p_->parser.write_some(false, nullptr, 0, ec);
    if (!ec) return true;
    return failed(ec, p_->fed, st);
}

bool header_json::failed(const json::error_code& ec, std::uint64_t at, status& st) {
    std::string msg = p_->parser.handler().message();
    if (msg.empty()) {
        msg = ec == json::error::extra_data ? "data after the JSON object (only spaces, tabs, LF and CR may follow it)"
              : ec == json::error::too_deep ? "nesting deeper than " + std::to_string(max_json_depth) + " levels"
              : ec == json::error::incomplete ? "the JSON ends early"
                                              : "JSON " + ec.message();
    }
    st.code = errc::InvalidHeaderDeserialization;
    st.message = "invalid header JSON at byte " + std::to_string(at) + ": " + msg;
    return false;
}

}  // namespace ringsafe::format
