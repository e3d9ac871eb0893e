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


def test_exclusions_name_the_test_kind():
    assert timm_suite.exclusion("test_model_forward_torchscript", "transnext_tiny")
    assert timm_suite.exclusion("test_model_forward_fx", "transnext_tiny") is None
    assert timm_suite.exclusion("test_model_forward", "SReT_T") is None
