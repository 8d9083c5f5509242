"""``ServeConfig.check``: the runtime options' rules, each refused with the flag named."""

from __future__ import annotations

import pytest

from bertkit.errors import OptionError
from bertkit.serve.config import ServeConfig


@pytest.mark.parametrize("options, words", [
    ({"runtime": "onnx"}, "runtime must be one of torch, openvino"),
    ({"runtime": "openvino", "device": "cuda"}, "runs on the CPU"),
    ({"runtime": "openvino", "precision": "fp16"}, "fp32, bf16, int8 or auto"),
    ({"runtime": "openvino", "precision": "int8"}, "needs --calibration FILE"),
    ({"calibration": "texts.txt"}, "--calibration is for --precision int8 only"),
    ({"runtime": "openvino", "calibration": "texts.txt"}, "--calibration is for"),
])
def test_runtime_options_refused_by_name(options, words):
    with pytest.raises(OptionError, match=words.replace("(", r"\(")):
        ServeConfig(model="m", **options).check()


@pytest.mark.parametrize("options", [
    {}, {"runtime": "openvino"}, {"runtime": "openvino", "precision": "auto"},
    {"runtime": "openvino", "precision": "int8", "calibration": "texts.txt"},
    {"precision": "int8", "calibration": "texts.txt"},  # torch: static INT8
])
def test_runtime_options_accepted(options):
    config = ServeConfig(model="m", **options).check()
    assert ServeConfig.from_json(config.to_json()) == config  # --workers hands it on as JSON


@pytest.mark.parametrize("options, words", [
    ({"api_key": ""}, "--api-key is empty"),
    ({"api_key": "   "}, "--api-key is empty"),
    ({"api_key": "k", "api_key_file": "f"}, "one of --api-key and --api-key-file"),
    ({"cors_allow_origin": ""}, "--cors-allow-origin is empty"),
    ({"cors_allow_origin": "example.org"}, "'example.org' is not an origin"),
    ({"cors_allow_origin": "https://a.org, https://b.org/path"}, "is not an origin"),
])
def test_access_settings_fail_closed(options, words, monkeypatch):
    """An empty key (an unset $KEY) or origin list is refused, never an open server."""
    monkeypatch.delenv("BERTKIT_API_KEY", raising=False)
    with pytest.raises(OptionError, match=words.replace("(", r"\(")):
        ServeConfig(model="m", **options).check()


def test_the_key_comes_from_a_file_or_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("BERTKIT_API_KEY", raising=False)
    assert ServeConfig(model="m").check().key() is None  # no key anywhere: open, as TEI
    (tmp_path / "key").write_text("s3cret\nignored\n")
    assert ServeConfig(model="m", api_key_file=str(tmp_path / "key")).check().key() == "s3cret"
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(OptionError, match="--api-key-file .*empty is empty"):
        ServeConfig(model="m", api_key_file=str(tmp_path / "empty")).check()
    with pytest.raises(OptionError, match="cannot read it"):
        ServeConfig(model="m", api_key_file=str(tmp_path / "missing")).check()
    monkeypatch.setenv("BERTKIT_API_KEY", "from-env")
    assert ServeConfig(model="m").check().key() == "from-env"
    monkeypatch.setenv("BERTKIT_API_KEY", "")
    with pytest.raises(OptionError, match=r"\$BERTKIT_API_KEY is empty"):
        ServeConfig(model="m").check()


def test_origins_lose_a_trailing_slash():
    assert ServeConfig(model="m", cors_allow_origin="https://a.org/, http://b.org:8080").origins() == \
        ["https://a.org", "http://b.org:8080"]
    assert ServeConfig(model="m").origins() == ["*"]


@pytest.mark.parametrize("logged", [True, False])
def test_the_access_log_setting_reaches_uvicorn(logged, monkeypatch):
    """``--no-access-log`` (a field, so a flag) turns uvicorn's line per request off."""
    import uvicorn

    from bertkit.serve import app as serve_app

    seen = {}
    monkeypatch.setattr(serve_app, "create_app", lambda config: "the app")
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: seen.update(options, app=app))
    serve_app.run(ServeConfig(model="m", port=0, access_log=logged))
    assert seen["app"] == "the app" and seen["access_log"] is logged
