# patchgrade: Cython's own cache of translated modules, for the setup of a
# `snapshot_build` image. cythonize() keeps each module's C output under a
# fingerprint of its source, every file it cimports or includes, Cython's
# version and the compile options, and reuses it when all of those are the
# same; a repository's setup.py does not ask for it, so this sets the
# `cache` default to $PATCHGRADE_CYTHON_CACHE when Cython's options module
# loads. With $PATCHGRADE_CYTHON_REMOTE (the compiler cache store's URL for
# Cython), a module missing from that folder is looked up in the store
# first, and one translated here is stored: so a snapshot finds what other
# snapshots of the repository translated. Loaded by a .pth line only while
# the cache variable is set, and removed with it after the setup: no test
# ever imports it.
import importlib.machinery
import os
import sys

# Cython < 3 keeps the defaults in Main, 3.x in Options (Main re-exports
# the same dict).
_OPTIONS = ("Cython.Compiler.Main", "Cython.Compiler.Options")
_DEPENDENCIES = "Cython.Build.Dependencies"


def _url(remote, name):
    return "%s/%s" % (remote.rstrip("/"), name)


def _fetch(remote, name, folder):
    """The store's entry `name` written into `folder`; False when absent."""
    import urllib.request

    try:
        with urllib.request.urlopen(_url(remote, name), timeout=30) as r:
            data = r.read()
    except Exception:
        return False
    tmp = os.path.join(folder, ".%s.patchgrade" % name)
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, os.path.join(folder, name))
    print("patchgrade: Cython module from the store: %s" % name)
    return True


def _store(remote, name, folder):
    import urllib.request

    with open(os.path.join(folder, name), "rb") as f:
        data = f.read()
    req = urllib.request.Request(_url(remote, name), data=data, method="PUT")
    try:
        urllib.request.urlopen(req, timeout=30).close()
        print("patchgrade: Cython module stored: %s" % name)
    except Exception as e:
        print("patchgrade: Cython module not stored: %s (%s)" % (name, e))


def _through_store(cythonize_one):
    # cythonize_one(pyx_file, c_file, fingerprint, ...) in Cython 0.28-3.0;
    # its cache entry is "<c file's name>-<fingerprint>" + ".gz" or ".zip".
    def wrapped(pyx_file, c_file, fingerprint, *args, **kwargs):
        remote = os.environ.get("PATCHGRADE_CYTHON_REMOTE")
        folder = os.environ.get("PATCHGRADE_CYTHON_CACHE")
        missed = []
        if remote and folder and fingerprint:
            base = "%s-%s" % (os.path.basename(c_file), fingerprint)
            names = [base + ".gz", base + ".zip"]
            try:
                os.makedirs(folder, exist_ok=True)
                here = any(os.path.exists(os.path.join(folder, n)) for n in names)
                if not here and not any(_fetch(remote, n, folder) for n in names):
                    missed = names
            except Exception as e:
                print("patchgrade: Cython store lookup failed: %s" % e)
        result = cythonize_one(pyx_file, c_file, fingerprint, *args, **kwargs)
        for n in missed:
            if os.path.exists(os.path.join(folder, n)):
                _store(remote, n, folder)
        return result

    return wrapped


class _CythonCacheDefault(object):
    def find_spec(self, name, path, target=None):
        if name not in _OPTIONS and name != _DEPENDENCIES:
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
            one = getattr(module, "cythonize_one", None)
            if name == _DEPENDENCIES and one is not None:
                module.cythonize_one = _through_store(one)

        spec.loader.exec_module = exec_and_set_default
        return spec


sys.meta_path.insert(0, _CythonCacheDefault())
