"""The profile contract's plain constants, apart from its pydantic models (:mod:`.profile_model`).

Writing a profile (:mod:`recstack.tree`) needs only these; building the models costs ~0.1 s of
start-up that commands which never validate (``recstack import``) should not pay.
"""

SCHEMA = "recstack.profile"
SCHEMA_VERSION = 2
LEVELS = ("run", "stage", "module", "op", "kernel")
MAX_TREE_DEPTH = 64  # nodes below the root; deeper trees are refused (Python's JSON parser fails near 2,500)
