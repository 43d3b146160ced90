"""Which folders of the repository become which packages of the wheel.

Everything else about the distribution is in pyproject.toml; this file exists because
pyproject.toml cannot list discovered packages and folder-mapped ones together.  The
repository keeps each file once, where its readers look for it, and the wheel carries it at
a fixed place (the data is read through `cake_core.shipped`):

- examples/ (kernels) and examples/tasks/ (tasks) -> cake_core/data/examples[/tasks]
- docs/rules/ (one page per diagnostic code)      -> cake_core/data/rules
- plugins/<dist>/<package> (first-party plugins)  -> the top-level <package>; their entry
  points are declared in pyproject.toml, so installing the one wheel installs the tactics.
"""

from setuptools import find_packages, setup

DATA = {
    "cake_core.data.examples": "examples",
    "cake_core.data.examples.tasks": "examples/tasks",
    "cake_core.data.rules": "docs/rules",
}
PLUGINS = {"cake_tactics": "plugins/cake-tactics", "cake_kmeans": "plugins/cake-kmeans"}

setup(
    packages=[
        *find_packages(include=["cake", "cake_core*", "cake_lsp*", "cake_agents*", "cake_cli*"]),
        *[p for pkg, root in PLUGINS.items() for p in find_packages(root, include=[f"{pkg}*"])],
        *DATA,
    ],
    package_dir={**DATA, **{pkg: f"{root}/{pkg}" for pkg, root in PLUGINS.items()}},
)
