"""The C library's exported symbols and its header agree (no dev servers needed, only the built
library: SYMORVA_FFI_LIB, as Scripts/contract-test sets it).

- The `symorva_` symbols libSymorvaFFI.so exports (`nm -D`, of any kind) are exactly the functions
  include/symorva.h declares, each a defined text symbol: the helpers of the C shims the SDK links
  in (Sources/C*/include/*.h: curl, GStreamer), which are not API, are hidden (their headers'
  `#pragma GCC visibility push(hidden)`).
- clients/c/header_check.c, compiled against the header alone with -Werror and linked with the
  library, calls every function with the header's types and checks the header's promises.
"""

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HEADER = ROOT / "include" / "symorva.h"
LIBRARY = os.environ.get("SYMORVA_FFI_LIB")
SHIMS = sorted((ROOT / "Sources").glob("C*/include/*.h"))

if not LIBRARY or not Path(LIBRARY).is_file():
    pytest.skip("SYMORVA_FFI_LIB names no built libSymorvaFFI.so", allow_module_level=True)


def declared(header=HEADER):
    text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return set(re.findall(r"^[A-Za-z_][\w\s\*]*?\b(symorva_\w+)\s*\(", text, flags=re.M))


def exported():
    listing = subprocess.run(["nm", "-D", "--defined-only", LIBRARY], check=True, capture_output=True,
                             text=True).stdout
    symbols = {}
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 3:
            symbols[parts[2]] = parts[1]
    return symbols


def test_the_header_declares_what_the_library_exports():
    functions = declared()
    assert len(functions) == 8, functions
    symbols = exported()
    for name in functions:
        assert symbols.get(name) == "T", f"{name} is declared but not exported as a function ({symbols.get(name)})"
    shims = set().union(*(declared(header) for header in SHIMS))
    assert shims and not shims & functions, "a shim declares a function of the public header"
    c_api = {name for name in symbols if name.startswith("symorva_")}
    assert c_api == functions, f"exported but not the header's: {sorted(c_api - functions)}"
    leaked = {name for name in symbols if name in shims}
    assert leaked == set(), f"C shim helpers exported: {sorted(leaked)}"


def test_a_c_program_built_against_the_header_alone_runs():
    compiler = shutil.which("cc") or shutil.which("clang")
    assert compiler, "no C compiler"
    folder = Path(tempfile.mkdtemp(prefix="symorva-header-"))
    program = folder / "header_check"
    library_dir = str(Path(LIBRARY).resolve().parent)
    subprocess.run([compiler, "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", str(ROOT / "include"),
                    str(ROOT / "clients" / "c" / "header_check.c"), "-o", str(program), "-L", library_dir,
                    "-lSymorvaFFI", f"-Wl,-rpath,{library_dir}"], check=True)
    arguments = [str(program)]
    if os.environ.get("SYMORVA_MANIFEST"):
        arguments += [os.environ["SYMORVA_MANIFEST"], str(folder / "data")]
    result = subprocess.run(arguments, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "header_check: ok" in result.stdout
