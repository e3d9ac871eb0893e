"""The harness that points timm's model tests at the paper models: selection, timm's filters, exclusions."""

import pytest
import timm

import timm_suite


def test_selection_defaults_to_one_model_per_family_and_all_means_every_paper_model(monkeypatch):
    monkeypatch.delenv(timm_suite.SELECT_ENV, raising=False)
    assert timm_suite.selected_models() == list(timm_suite.REPRESENTATIVES)
    monkeypatch.setenv(timm_suite.SELECT_ENV, "all")
    every = timm_suite.selected_models()
    assert set(timm_suite.REPRESENTATIVES) <= set(every)
    assert "resnet18" not in every and "swin_tiny_patch4_window7_224" not in every  # timm's own models stay out
    monkeypatch.setenv(timm_suite.SELECT_ENV, "transnext_micro, SReT_T_*")
    assert timm_suite.selected_models()[0] == "transnext_micro"
    assert all(n.startswith("SReT_T_") for n in timm_suite.selected_models()[1:])


def test_unknown_model_name_is_one_clear_error(monkeypatch):
    monkeypatch.setenv(timm_suite.SELECT_ENV, "transnext_micro,transnxt_tiny")
    with pytest.raises(ValueError, match="no paper model matches transnxt_tiny"):
        timm_suite.selected_models()


def test_list_models_applies_timms_filters_to_the_selected_models():
    list_models, list_pretrained = timm_suite.make_list_models(["transnext_micro", "SReT_T", "SReT_108"])
    assert list_models() == ["SReT_108", "SReT_T", "transnext_micro"]  # timm's natural order
    assert list_models(exclude_filters=["transnext_*"]) == [n for n in list_models() if n != "transnext_micro"]
    # timm's NON_STD_FILTERS ('vit_*' ...) pick the ViT-based SReT-108 through its alias, and only it
    assert list_models(filter=["vit_*", "deit*"]) == ["SReT_108"]
    assert "SReT_108" not in list_models(exclude_filters=["vit_*"])
    # a module= filter (timm's FEAT_INTER_FILTERS) counts the paper modules in; no paper model has weights on a hub
    assert set(list_models(module=["resnet", "vision_transformer"])) == set(list_models())
    assert list_pretrained("test_*") == [] and list_models(pretrained=True) == []
    assert timm.list_models is timm_suite._real_list_models  # the shim is only installed while timm's file imports


def test_timm_vits_underneath_are_classified_as_timm_classifies_its_vits():
    # timm tells sequence-output models by name ('vit_*', 'deit*'); ours are matched by what they are
    names = [
        "steps_deit_tiny",
        "scalenet_deit_tiny_2x",
        "deit_w136_d24",
        "steps_swin_tiny",
        "steps_resnet18",
        "transnext_micro",
    ]
    list_models, _ = timm_suite.make_list_models(names)
    non_std = list_models(filter=["vit_*", "deit*"])
    assert set(non_std) == {"steps_deit_tiny", "scalenet_deit_tiny_2x", "deit_w136_d24"}
    assert set(list_models(exclude_filters=["vit_*", "deit*"])) == {
        "steps_swin_tiny",
        "steps_resnet18",
        "transnext_micro",
    }
    assert timm_suite.model_kind("steps_deit_tiny").sequence_output
    assert not timm_suite.model_kind("steps_swin_tiny").sequence_output


def test_language_models_run_no_image_test():
    for test in ("test_model_forward", "test_model_default_cfgs", "test_model_forward_features"):
        assert timm_suite.exclusion(test, "steps_lm_30m") == timm_suite.NOT_IMAGE_REASON
        assert timm_suite.exclusion(test, "transformer_lm_30m") == timm_suite.NOT_IMAGE_REASON
    assert timm_suite.exclusion("test_model_forward", "steps_deit_tiny") is None


def test_models_built_with_frozen_parameters_skip_only_the_backward_tests():
    # decided by the built model's requires_grad flags, not by its name
    frozen = "scalenet_swin_tiny_2x"  # Swin trains only adjustments + norms by the paper's recipe
    assert timm_suite.model_kind(frozen).frozen
    for test in timm_suite.BACKWARD_TESTS:
        assert timm_suite.exclusion(test, frozen) == timm_suite.FROZEN_REASON
        assert timm_suite.exclusion(test, "scalenet_deit_tiny_2x") is None  # DeiT-T trains everything
        assert timm_suite.exclusion(test, "scalenet_swin_tiny_grow_stack") is None  # the baselines train all
    for test in ("test_model_forward", "test_model_default_cfgs", "test_model_forward_fx"):
        assert timm_suite.exclusion(test, frozen) is None


def test_exclusions_name_the_test_kind():
    assert timm_suite.exclusion("test_model_forward_torchscript", "transnext_tiny")
    assert timm_suite.exclusion("test_model_forward_fx", "transnext_tiny") is None
    assert timm_suite.exclusion("test_model_forward", "SReT_T") is None
    assert timm_suite.exclusion("test_model_forward_torchscript", "SReT_T") is None  # ported (docs/sret.md)


def _setup_env(monkeypatch, cache):
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[3] / "tools" / "setup_env.py"
    spec = importlib.util.spec_from_file_location("setup_env_for_timm_tests", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "CACHE", cache)
    monkeypatch.setattr(module, "pip", lambda *a, **k: pytest.fail("the sdist is cached; nothing to download"))
    return module


def _sdist(path, version, files):
    import io
    import tarfile

    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"timm-{version}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_setup_unpacks_only_timms_tests_from_the_pinned_sdist(monkeypatch, tmp_path):
    setup_env = _setup_env(monkeypatch, tmp_path)
    version = setup_env.pinned_version("timm")
    assert version == timm.__version__  # the suite matches the installed timm
    _sdist(
        tmp_path / "sdist" / f"timm-{version}.tar.gz",
        version,
        {"tests/test_models.py": "def test_x(): pass\n", "tests/conftest.py": "", "timm/__init__.py": ""},
    )
    setup_env.ensure_timm_tests()
    tests = tmp_path / "timm-tests" / f"timm-{version}" / "tests"
    assert (tests / "test_models.py").read_text() == "def test_x(): pass\n"
    assert not (tmp_path / "timm-tests" / f"timm-{version}" / "timm").exists()
    setup_env.ensure_timm_tests()  # a second setup is a no-op


def test_setup_refuses_an_sdist_without_the_model_tests(monkeypatch, tmp_path):
    setup_env = _setup_env(monkeypatch, tmp_path)
    version = setup_env.pinned_version("timm")
    _sdist(tmp_path / "sdist" / f"timm-{version}.tar.gz", version, {"timm/__init__.py": ""})
    with pytest.raises(setup_env.SetupError, match="has no .*test_models.py; delete it and re-run make setup"):
        setup_env.ensure_timm_tests()
