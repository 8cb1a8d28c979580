"""Packaging of graph_override: `pip install -e .[test]`.

Extras: `test` (the suite), `scripts` (matplotlib for the plots of
scripts/plot_estimators.py and tools/bench.py; the training scripts need
nothing beyond the package itself), `docs` (the MkDocs site in docs/).
"""

import pathlib
import re

from setuptools import Extension, find_packages, setup

HERE = pathlib.Path(__file__).parent
VERSION = re.search(r'__version__ = "([^"]+)"',
                    (HERE / "graph_override" / "__init__.py").read_text()).group(1)

setup(
    name="graph-override",
    version=VERSION,
    description=("Safe, interchangeable and verified gradient overrides for "
                 "TensorFlow 1 style graphs, frozen GraphDefs and their "
                 "migration to TF2"),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    packages=find_packages(include=["graph_override", "graph_override.*"]),
    # The oldest supported TensorFlow, 2.15, runs on Python 3.9-3.11; the
    # current one, 2.21, on 3.10-3.13. pip picks a TensorFlow for the Python
    # at hand (compat/ has the tested pairs).
    python_requires=">=3.9",
    install_requires=[
        # 2.15 is the oldest supported release (the last with Keras 2 and
        # numpy 1); compat/ holds the constraints of each supported release.
        "tensorflow>=2.15",
        "numpy",
        # libcst: the source migration rewrites Python files and must keep
        # comments and formatting, which the ast module drops.
        "libcst>=1.0",
        # scikit-learn ships the handwritten digits the demo and
        # graph_override.training learn from, so nothing is downloaded at run
        # time; tqdm draws the training progress bar.
        "scikit-learn>=1.2",
        "tqdm>=4",
        # SciPy (which scikit-learn requires too) solves ROAD's sparse
        # imputation and ranks maps for the metrics' rank correlations.
        "scipy>=1.8",
    ],
    extras_require={
        "test": [
            "pytest>=7",
            # The suite runs on every core (pytest.ini: -n auto). pytest-xdist
            # is pytest's own parallel runner: one process per worker, so
            # TensorFlow's global state (the gradient registry, the default
            # graph, eager/graph mode) stays per process as the tests expect;
            # its worksteal scheduling keeps the cores busy while the few
            # long tests run.
            "pytest-xdist>=3.5",
            # Property-based tests of the GraphDef reader (mutated bytes).
            "hypothesis>=6",
            # The estimator plot and the benchmark figures.
            "matplotlib>=3.5",
            "ruff>=0.5",  # the lint gate of .ci/run (ruff.toml)
        ],
        # The reference the quantized Keras layers are tested against
        # (tests/keras/test_keras_larq.py): larq runs on Keras 2 only, so
        # compat/run.sh installs this extra for TensorFlow 2.15 alone. Never a
        # dependency of the package.
        "reference": ["larq==0.13.3", "terminaltables>=3.1"],
        # scripts/plot_estimators.py and the figure of tools/bench.py.
        "scripts": ["matplotlib>=3.5"],
        # The documentation site: `mkdocs build --strict` (mkdocs.yml; the
        # API reference reads the modules with mkdocstrings-python 2's
        # force_inspection and loads docs/griffe_examples.py).
        "docs": [
            "mkdocs>=1.6",
            "mkdocs-material>=9.5",
            "mkdocstrings[python]>=1.0",
            "mkdocstrings-python>=2.0",
        ],
    },
    # A C reader of serialized GraphDefs (graph_override/frozen/graphdef/_scan.c) that
    # makes `patch_file` and `load` of large graphs several times faster. It
    # is optional: where no C compiler is at hand the build skips it and
    # graph_override.frozen.graphdef.wire does the same work in Python and numpy.
    ext_modules=[Extension("graph_override.frozen.graphdef._scan",
                           ["graph_override/frozen/graphdef/_scan.c"],
                           depends=["graph_override/frozen/graphdef/_scan_wire.h",
                                    "graph_override/frozen/graphdef/_scan_names.h"],
                           optional=True)],
    entry_points={"console_scripts": ["graph-override=graph_override.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.9",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
