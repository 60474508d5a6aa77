# patchgrade: Cython's own cache of translated modules, for the setup of a
# `snapshot_build` image. cythonize() keeps each module's C output under a
# fingerprint of its source, every file it cimports or includes, Cython's
# version and the compile options, and reuses it when all of those are the
# same; a repository's setup.py does not ask for it, so this sets the
# `cache` default to $PATCHGRADE_CYTHON_CACHE when Cython's options module
# loads. Loaded by a .pth line only while that variable is set, and removed
# with it after the setup: no test ever imports it.
import importlib.machinery
import os
import sys

# Cython < 3 keeps the defaults in Main, 3.x in Options (Main re-exports
# the same dict).
_MODULES = ("Cython.Compiler.Main", "Cython.Compiler.Options")


class _CythonCacheDefault(object):
    def find_spec(self, name, path, target=None):
        if name not in _MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_set_default(module):
            exec_module(module)
            options = getattr(module, "default_options", None)
            if isinstance(options, dict) and "cache" in options:
                options["cache"] = os.environ["PATCHGRADE_CYTHON_CACHE"]

        spec.loader.exec_module = exec_and_set_default
        return spec


sys.meta_path.insert(0, _CythonCacheDefault())
