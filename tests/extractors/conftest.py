import pytest

# Let pytest explain failing asserts inside the contract kit, which is imported from a library package.
pytest.register_assert_rewrite("extractors.testing")
