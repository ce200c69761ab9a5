"""Build step that ships the problem files and example solutions inside the package.

`problems/` and `examples/solutions/` live at the top of the checkout (where people edit them);
a wheel must carry them so that `kbv3` works after a plain `pip install .` without a checkout.
This `build_py` copies them into `kernelbench_v3/_problems/` and `kernelbench_v3/_examples/` of
the build tree; `catalog.default_problems_dir()` and `demo.EXAMPLES_DIR` fall back to those
folders when no checkout is found. An editable install reads the checkout itself, so nothing is
copied there. Everything else is declared in pyproject.toml.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# (source folder in the checkout, folder inside the package, file patterns)
BUNDLED = (
    ("problems", "_problems", ("*/*.py", "README.md")),
    ("examples/solutions", "_examples", ("*/*.py",)),
)


class build_py_with_data(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for source, target, patterns in BUNDLED:
            root = HERE / source
            if not root.is_dir():
                raise FileNotFoundError(f"{root} is missing: the package cannot be built without it")
            for pattern in patterns:
                for path in sorted(root.glob(pattern)):
                    dest = Path(self.build_lib) / "kernelbench_v3" / target / path.relative_to(root)
                    self.mkpath(str(dest.parent))
                    self.copy_file(str(path), str(dest))


setup(cmdclass={"build_py": build_py_with_data})
