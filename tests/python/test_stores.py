"""gs:// and az:// from Python, against real servers started here and the
stores' own clients from PyPI as the references: google-cloud-storage writes
and reads through fake-gcs-server, azure-storage-blob writes and reads through
the Azure Blob stand-in (tests/support/azure_blob_standin.py, which checks its
Shared Key and SAS signatures as the service does), and ringsafe must read
the same bytes through the same servers. The service-account path goes
through tests/support/gcs_standin.py, whose token endpoint verifies the RS256
JWT with openssl."""

import datetime
import os
import pathlib
import subprocess
import sys

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
try:
    import ringsafe
except ImportError:
    sys.path.insert(0, str(ROOT / "build" / "engine" / "python"))
    import ringsafe
import ringsafe.torch as rpt
import safetensors.torch as spt

from servers import AZURE_DEV_ACCOUNT, AZURE_DEV_KEY, FakeGcs, ServerUnavailable, Standin

BUCKET, OBJECT = "models", "dir/model file.safetensors"


def tensors():
    g = torch.Generator().manual_seed(11)
    return {"emb": torch.randn(512, 384, generator=g).to(torch.bfloat16),
            "w": torch.randn(300, 700, generator=g),
            "mask": torch.randint(0, 2, (1000,), generator=g, dtype=torch.uint8),
            "empty": torch.zeros(0, 4)}


def same(a, b):
    assert sorted(a) == sorted(b)
    for k in b:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert torch.equal(a[k].view(torch.uint8) if a[k].numel() else a[k], b[k].view(torch.uint8) if b[k].numel() else b[k]), k


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    t = tensors()
    spt.save_file(t, str(d / "model.safetensors"), metadata={"format": "pt"})
    return d / "model.safetensors", t


# ---------------------------------------------------------------- gs://

@pytest.fixture(scope="module")
def gcs(tmp_path_factory, checkpoint):
    pytest.importorskip("google.cloud.storage")
    data = tmp_path_factory.mktemp("gcs-data")
    (data / BUCKET).mkdir()
    try:
        server = FakeGcs(data, tmp_path_factory.mktemp("gcs-log"))
    except ServerUnavailable as e:
        pytest.skip(str(e))
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage
    client = storage.Client(project="test", credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": server.endpoint})
    client.bucket(BUCKET).blob(OBJECT).upload_from_filename(str(checkpoint[0]))  # the reference writes it
    yield server, client
    server.close()


def test_gs_load_file_equals_google_cloud_storage_download(gcs, checkpoint, monkeypatch):
    server, client = gcs
    expected = spt.load(client.bucket(BUCKET).blob(OBJECT).download_as_bytes())
    same(expected, checkpoint[1])
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.endpoint)  # as google-cloud-storage reads it
    url = f"gs://{BUCKET}/{OBJECT}"
    same(rpt.load_file(url, http_chunk=64 << 10, connections=4), expected)
    with ringsafe.safe_open(url, "pt") as f:
        assert sorted(f.keys()) == sorted(expected)
        assert torch.equal(f.get_tensor("w"), expected["w"])
        assert torch.equal(f.get_slice("w")[10:20, 5:9], expected["w"][10:20, 5:9])
    same(dict(rpt.iter_tensors(url)), expected)
    model = torch.nn.Module()
    model.register_buffer("w", torch.zeros(300, 700))
    rpt.read_into(url, {"w": model.w})
    assert torch.equal(model.w, expected["w"])


def test_gs_service_account_through_the_token_endpoint(gcs, checkpoint, tmp_path):
    server, _ = gcs
    key, pub = tmp_path / "sa.key", tmp_path / "sa.pub"
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-out", pub], check=True, capture_output=True)
    email = "ringsafe-py@ringsafe-test.iam.gserviceaccount.com"
    front = Standin("gcs_standin.py", ["--upstream", server.endpoint, "--public-key", pub, "--client-email", email,
                                       "--require-token"], tmp_path)
    try:
        import json
        sa = tmp_path / "sa.json"
        sa.write_text(json.dumps({"type": "service_account", "client_email": email, "private_key": key.read_text(),
                                  "private_key_id": "k1", "token_uri": front.url + "/token"}))
        got = rpt.load_file(f"gs://{BUCKET}/{OBJECT}", endpoint_url=front.url, gcs_credentials=str(sa))
        same(got, checkpoint[1])
        log = front.log()
        assert [e["status"] for e in log if e["path"] == "/token"] == [200]
        gets = [e for e in log if e["method"] == "GET"]
        assert gets and all(e["token_ok"] for e in gets)
        # Without credentials the stand-in refuses: the error names the URL, and no token leaks.
        with pytest.raises(ringsafe.SafetensorError, match="401") as e:
            rpt.load_file(f"gs://{BUCKET}/{OBJECT}", endpoint_url=front.url, anonymous=True)
        assert "ya29" not in str(e.value)
    finally:
        front.close()


def test_gs_cli_ls_and_verify(gcs, checkpoint):
    server, _ = gcs
    cli = ROOT / "build" / "tools" / "ringsafe"
    if not cli.exists():
        pytest.skip("the CLI is not built")
    env = dict(os.environ, STORAGE_EMULATOR_HOST=server.endpoint)
    r = subprocess.run([cli, "ls", f"gs://{BUCKET}/{OBJECT}"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "emb" in r.stdout and "4 tensors" in r.stdout


# ---------------------------------------------------------------- az://

@pytest.fixture(scope="module")
def azure(tmp_path_factory, checkpoint):
    blob = pytest.importorskip("azure.storage.blob")
    data = tmp_path_factory.mktemp("az-data")
    try:
        s = Standin("azure_blob_standin.py", ["--data", data, "--key", AZURE_DEV_KEY], tmp_path_factory.mktemp("az-log"))
    except ServerUnavailable as e:
        pytest.skip(str(e))
    conn = (f"DefaultEndpointsProtocol=http;AccountName={AZURE_DEV_ACCOUNT};AccountKey={AZURE_DEV_KEY};"
            f"BlobEndpoint={s.url}/{AZURE_DEV_ACCOUNT};")
    svc = blob.BlobServiceClient.from_connection_string(conn)
    svc.create_container(BUCKET)
    with open(checkpoint[0], "rb") as f:  # the reference signer writes it; the stand-in verified its Shared Key
        svc.get_blob_client(BUCKET, OBJECT).upload_blob(f, overwrite=True)
    yield s, svc, conn
    s.close()


def test_az_load_file_equals_azure_storage_blob_download(azure, checkpoint, monkeypatch):
    s, svc, conn = azure
    expected = spt.load(svc.get_blob_client(BUCKET, OBJECT).download_blob().readall())
    same(expected, checkpoint[1])
    url = f"az://{BUCKET}/{OBJECT}"
    same(rpt.load_file(url, azure_connection_string=conn, http_chunk=64 << 10, connections=4), expected)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
    with ringsafe.safe_open(url, "pt") as f:
        assert torch.equal(f.get_tensor("emb"), expected["emb"])
    same(dict(rpt.iter_tensors(url)), expected)
    ours = [e for e in s.log() if e["method"] == "GET" and e["range"]]
    assert ours and all(e["authorization"] == "SharedKey" and e["x_ms_version"] for e in ours)
    assert any(e["if_match"].startswith('"0x') for e in ours)


def test_az_account_sas_from_the_reference_signer(azure, checkpoint):
    s, _, _ = azure
    from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas
    sas = generate_account_sas(AZURE_DEV_ACCOUNT, AZURE_DEV_KEY, resource_types=ResourceTypes(object=True),
                               permission=AccountSasPermissions(read=True),
                               expiry=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1))
    got = rpt.load_file(f"az://{BUCKET}/{OBJECT}", azure_account=AZURE_DEV_ACCOUNT, azure_sas_token=sas,
                        endpoint_url=f"{s.url}/{AZURE_DEV_ACCOUNT}")
    same(got, checkpoint[1])
    sas_gets = [e for e in s.log() if e["authorization"] == "SAS" and e["range"]]
    assert sas_gets and all(e["query"] == sas for e in sas_gets)  # appended as it is, never re-encoded
    with pytest.raises(ringsafe.SafetensorError, match="403"):
        rpt.load_file(f"az://{BUCKET}/{OBJECT}", azure_account=AZURE_DEV_ACCOUNT, azure_key="A" * 86 + "==",
                      endpoint_url=f"{s.url}/{AZURE_DEV_ACCOUNT}")


def test_az_options_are_checked(azure):
    with pytest.raises(TypeError, match="azure_key"):
        rpt.load_file(f"az://{BUCKET}/{OBJECT}", azure_key=5)
    with pytest.raises(ringsafe.SafetensorError, match="AZURE_STORAGE_ACCOUNT"):
        rpt.load_file("az://c/b.safetensors", endpoint_url=None)
