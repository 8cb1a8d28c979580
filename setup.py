"""Packaging of graph_override: `pip install -e .[test]`."""

import pathlib
import re

from setuptools import find_packages, setup

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
    python_requires=">=3.9",
    install_requires=[
        # 2.15 is the oldest supported release (the last with Keras 2 and
        # numpy 1); compat/ holds the constraints of each supported release.
        "tensorflow>=2.15",
        "numpy",
        # libcst: the source migration rewrites Python files and must keep
        # comments and formatting, which the ast module drops.
        "libcst>=1.0",
    ],
    extras_require={
        "test": [
            "pytest>=7",
            # Property-based tests of the GraphDef reader (mutated bytes).
            "hypothesis>=6",
            # Real data for the training scripts ships inside scikit-learn.
            "scikit-learn>=1.2",
            "tqdm>=4",
            "matplotlib>=3.5",
        ],
        "scripts": ["scikit-learn>=1.2", "tqdm>=4", "matplotlib>=3.5"],
    },
    entry_points={"console_scripts": ["graph-override=graph_override.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
