"""`zoo list` without importing torch: per-model figures that need a model skeleton, recorded.

Most of a zoo model's summary comes from its config (tables, rows, bytes). Three
figures need the model built on the meta device (torch): dense parameters,
dense FLOPs per sample and lookups per sample; none depends on ``scale`` (it
scales table rows only). They are recorded in :data:`SKELETON_FIGURES` with the
sha256 of the config file they were computed from; a config that changed since
falls back to building the skeleton. ``python -m recstack.zoo.catalog`` prints
the current table; a test checks it equals :func:`recstack.zoo.build.summary`.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

from recstack.zoo.config import builtin_names, load_model_config

SKELETON_FIGURES: dict[str, dict[str, Any]] = {'rmc1': {'config_sha256': 'c6f52381f94bb2493ccce0add74d6ede69484985fe1eb7940eefb56ba89bb7d1',
          'lookups_per_sample': 640.0,
          'dense_flops_per_sample': 200832,
          'dense_params': 100833},
 'rmc2': {'config_sha256': '2d1b8723a4645bf640691547ca6217604159f604533d16503fd719fdb1afd806',
          'lookups_per_sample': 3840.0,
          'dense_flops_per_sample': 639104,
          'dense_params': 319937},
 'rmc3': {'config_sha256': '3b48a8043bc46cad5aa6c89871faa57fb870089c0ab8112982d7868e39d75886',
          'lookups_per_sample': 200.0,
          'dense_flops_per_sample': 6406656,
          'dense_params': 3205409},
 'ncf': {'config_sha256': '0aea2eca3623e37b9f8b0d3ad78436021252cfa54d927d38438670f3b4416781',
         'lookups_per_sample': 4.0,
         'dense_flops_per_sample': 295040,
         'dense_params': 148289},
 'wnd': {'config_sha256': '7c432cd96b9aedec66471002d2f5c497540f04b7c842feaaf1bd55ba0badf72f',
         'lookups_per_sample': 27.0,
         'dense_flops_per_sample': 4130304,
         'dense_params': 2066946},
 'mtwnd': {'config_sha256': '69d584aa28c4158919736451eef7011278d1a746f52e89a3892f6be7ab698f55',
           'lookups_per_sample': 43.0,
           'dense_flops_per_sample': 5244160,
           'dense_params': 2624002},
 'din': {'config_sha256': 'ec516520f7f7d135d0027395c4671eaf3a9f4111ef3cb3dc8961e0dcdbe1c20c',
         'lookups_per_sample': 259.0,
         'dense_flops_per_sample': 1635520,
         'dense_params': 45179},
 'dien': {'config_sha256': '4062533ac0cb41a72f142466c04db1a0121f4738d908aa355f65f025475a8b6b',
          'lookups_per_sample': 43.0,
          'dense_flops_per_sample': 3869760,
          'dense_params': 96378},
 'dlrmv2': {'config_sha256': '640d9c4664da775d443c38954ec5ca5cad8a2fb96477ad7f4c2b75c6cad3f672',
            'lookups_per_sample': 214.0,
            'dense_flops_per_sample': 32081664,
            'dense_params': 16044545},
 'deepfm': {'config_sha256': '8906b159e225c86261b80f73115b9289e8ba3799bc124c6d2a32c43782a12888',
            'lookups_per_sample': 26.0,
            'dense_flops_per_sample': 954620,
            'dense_params': 477745},
 'twotower': {'config_sha256': 'b97d9df8d891f7c112e1c40e72458f3da34b7d61c69952f8243a414029c467e7',
              'lookups_per_sample': 2.0,
              'dense_flops_per_sample': 65664,
              'dense_params': 33152},
 'bst': {'config_sha256': '36e52d9569fb71d4968047ee0d5ae2919d3df77af399e7445341f5c7af91e01e',
         'lookups_per_sample': 48.0,
         'dense_flops_per_sample': 3816192,
         'dense_params': 872577},
 'hstu': {'config_sha256': '795702fb2996ec0ab08bf669c188e85a7555557d6f77a3b7e748504ef07545a0',
          'lookups_per_sample': 101.0,
          'dense_flops_per_sample': 53248128,
          'dense_params': 176768}}


def config_sha256(name: str) -> str:
    """sha256 of a built-in model's config file."""
    return hashlib.sha256(resources.files("recstack.zoo").joinpath(f"configs/{name}.yaml").read_bytes()).hexdigest()


def _row(name: str, scale: float) -> dict[str, Any]:
    fig = SKELETON_FIGURES.get(name)
    if fig is None or fig["config_sha256"] != config_sha256(name):
        from recstack.zoo.build import summary

        return summary(name, scale)
    cfg = load_model_config(name)
    if scale != 1.0:
        cfg = cfg.scaled(scale)
    return cfg.summary_row(fig["lookups_per_sample"], fig["dense_flops_per_sample"], fig["dense_params"])


def list_rows(scale: float = 1.0) -> list[dict[str, Any]]:
    """The `zoo list` rows (the same dicts as :func:`recstack.zoo.build.summary`)."""
    return [_row(n, scale) for n in builtin_names()]


def current_figures() -> dict[str, dict[str, Any]]:
    """The skeleton figures computed now (imports torch)."""
    from recstack.zoo.build import summary

    out = {}
    for name in builtin_names():
        s = summary(name)
        out[name] = {
            "config_sha256": config_sha256(name),
            **{k: s[k] for k in ("lookups_per_sample", "dense_flops_per_sample", "dense_params")},
        }
    return out


if __name__ == "__main__":
    import pprint

    pprint.pprint(current_figures(), sort_dicts=False, width=110)
