"""Package mapping (the rest of the metadata is in pyproject.toml).

The top-level folders ``verifiers/`` and ``sandboxes/`` install as ``rewardkit.verifiers`` and
``rewardkit.sandboxes``: ``import verifiers`` must never resolve to this project, because a
popular PyPI package in the same field already owns that name. pyproject.toml alone cannot
rename discovered sub-packages, hence this file.
"""
from setuptools import find_packages, setup

MAPPED = {"verifiers": "rewardkit.verifiers", "sandboxes": "rewardkit.sandboxes"}

packages = find_packages(include=["rewardkit", "rewardkit.*"])
package_dir = {"rewardkit": "rewardkit"}
for folder, name in MAPPED.items():
    package_dir[name] = folder
    for sub in find_packages(include=[folder, folder + ".*"]):
        packages.append(name + sub[len(folder):])

setup(packages=packages, package_dir=package_dir,
      package_data={"": ["*.json", "*.jsonl", "*.yaml", "*.toml", "*.txt"]})
