import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # `import variants`

import variants  # noqa: E402

CANDIDATES = Path(__file__).parent / "candidates"


@pytest.fixture(scope="session")
def candidate(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`candidate("softmax_ok.py")` is a file of candidates/; `candidate("softmax_hang.py")` a built variant."""
    directory = tmp_path_factory.mktemp("variants")

    def get(name: str) -> Path:
        path = CANDIDATES / name
        if path.exists():
            return path
        return variants.write(name.removeprefix("softmax_").removesuffix(".py"), directory)

    return get
