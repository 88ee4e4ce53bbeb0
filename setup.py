"""Maps the repository's top-level folders into the one import package ``sayso``.

``app/`` -> ``sayso.app``, ``engine/`` -> ``sayso.engine`` (with their subpackages), ``shaders/`` ->
``sayso.shaders``, ``resources/`` -> ``sayso.resources``; ``sayso/`` holds the package's own
``__init__`` and ``__main__``, and links to the four folders for a checkout that isn't installed,
which the build doesn't follow: the mapping names the folders, so a wheel holds real files. Everything
else (metadata, package data) is in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

FOLDERS = ("app", "engine", "shaders", "resources")

setup(
    package_dir={"sayso": "sayso", **{f"sayso.{folder}": folder for folder in FOLDERS}},
    # Namespace search, so that resources/icons (data only) is a package too.
    packages=["sayso", *(f"sayso.{name}" for name in find_namespace_packages(include=[f"{f}*" for f in FOLDERS]))],
)
