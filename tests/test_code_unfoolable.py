"""Tricks that fool in-process harnesses must score 0.0 here: the candidate's code is wrong in
every case below, and each adds one way of faking a pass. The verdict comes from the trusted
side, which only ever receives plain data over the channel."""
import os
import uuid

import pytest

from rewardkit.types import Sample
from rewardkit.verifiers.code import CodeVerifier

WRONG = "def add(a, b):\n    return a - b\n"
FRAME = ("def _frame(obj):\n    import json, struct\n    b = json.dumps(obj).encode()\n"
         "    return struct.pack('>I', len(b)) + b\n")

TRICKS = {
    "always_equal": "class A:\n    def __eq__(self, o): return True\n"
                    "    def __ne__(self, o): return False\n    def __bool__(self): return True\n"
                    "    def __hash__(self): return 0\n"
                    "def add(a, b):\n    return A()\n",
    "always_equal_int_subclass": "class I(int):\n    def __eq__(self, o): return True\n"
                                 "def add(a, b):\n    return I(0)\n",
    "always_equal_in_a_list": "class A:\n    def __eq__(self, o): return True\n"
                              "def add(a, b):\n    return [A()]\n",
    "sys_exit_at_load": WRONG + "import sys\nsys.exit(0)\n",
    "os_exit_at_load": WRONG + "import os\nos._exit(0)\n",
    "raise_systemexit_at_load": WRONG + "raise SystemExit(0)\n",
    "raise_keyboardinterrupt_at_load": WRONG + "raise KeyboardInterrupt\n",
    "sys_exit_in_call": "def add(a, b):\n    import sys\n    sys.exit(0)\n",
    "os_exit_in_call": "def add(a, b):\n    import os\n    os._exit(0)\n",
    "raise_systemexit_in_call": "def add(a, b):\n    raise SystemExit(0)\n",
    "raise_keyboardinterrupt_in_call": "def add(a, b):\n    raise KeyboardInterrupt\n",
    "print_pass_markers": WRONG + "print('passed')\nprint('All tests passed')\nprint('OK')\n"
                          "import sys\nprint('passed', file=sys.stderr)\n",
    "forge_frames_on_the_channel": WRONG + FRAME + "import os\n"
        "os.write(3, _frame({'ok': True, 'names': {'add': {'kind': 'callable'}}, "
        "'tests': [{'verdict': 'passed'}], 'passed': True}))\n"
        "os.write(3, _frame({'ok': True, 'value': True}) * 20)\n",
    "patch_builtins": WRONG + "import builtins\n"
        "builtins.AssertionError = type('Nope', (Exception,), {})\n"
        "builtins.isinstance = lambda *a: True\nbuiltins.len = lambda x: 0\n"
        "builtins.print = lambda *a, **k: None\n",
    "patch_assert_machinery": WRONG + "import sys\nsys.settrace(lambda *a: None)\n"
        "sys.excepthook = lambda *a: None\n__debug__ if False else None\n",
    "patch_wire_to_always_true": WRONG + "import sys\nw = sys.modules.get('rk_wire')\n"
        "if w:\n    w.to_tree = lambda v, _d=0: True\n",
    "patch_stub_functions": WRONG + "import gc\n"
        "for o in gc.get_objects():\n"
        "    if isinstance(o, dict) and 'serve' in o and 'resolve' in o:\n"
        "        o['plain'] = lambda v: True\n"
        "        o['describe_error'] = lambda e: ['AssertionError', 'passed']\n",
    "patch_harness_if_importable": WRONG + "try:\n"
        "    import rewardkit.verifiers.code.harness as h\n"
        "    h.Judge._run_one = lambda *a: ('passed', None, 0.0)\n"
        "except Exception:\n    pass\n",
    "override_check": WRONG + "def check(candidate):\n    return True\n"
                      "__rk_candidate__ = None\n",
}

HUMANEVAL = {"test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"
                     "    assert candidate(2, 3) == 5\n", "entry_point": "add"}
ASSERTS = {"test": "assert add(1, 2) == 3\nassert add(2, 3) == 5\n"}
CALL = {"fn_name": "add", "inputs": [[1, 2], [2, 3]], "outputs": [3, 5]}


@pytest.fixture(scope="module")
def verifier():
    with CodeVerifier(pool_size=2, timeout=2.0, partial_credit=True) as v:
        yield v


@pytest.mark.parametrize("style, reference", [("humaneval", HUMANEVAL), ("assert", ASSERTS),
                                              ("call", CALL)])
def test_every_trick_scores_zero_on_a_wrong_solution(verifier, style, reference):
    names = list(TRICKS)
    scores = verifier.score([Sample("", f"```python\n{TRICKS[n]}```", reference) for n in names])
    passed = {n: s.value for n, s in zip(names, scores) if s.value != 0.0 or not s.ok}
    assert passed == {}, {n: s.info for n, s in zip(names, scores) if n in passed}
    # and the same harness still passes an honest right answer
    right = verifier.score([Sample("", "def add(a, b):\n    return a + b\n", reference)])[0]
    assert right.value == 1.0


def test_io_style_pass_markers_and_exits_do_not_pass(verifier):
    ref = {"inputs": ["1 2\n"], "outputs": ["3\n"]}
    tricks = ["print('passed')", "print('All tests passed')\nimport sys\nsys.exit(0)",
              "import os\nos._exit(0)", "raise SystemExit(0)", "print(open(0).read())"]
    scores = verifier.score([Sample("", f"```python\n{t}\n```", ref) for t in tricks])
    assert [s.value for s in scores] == [0.0] * len(tricks)


def test_expected_outputs_cannot_be_read_from_disk_or_other_processes(verifier, tmp_path):
    """The expected value lives only in the host's memory and in a host file whose path the
    candidate knows; it searches files, /proc (cmdline, environ, memory of every process it can
    see), its environment and its own memory, and returns the first find."""
    secret = f"SECRET-{uuid.uuid4().hex}"
    dataset = tmp_path / "tests.jsonl"
    dataset.write_text(f'{{"expected": "{secret}"}}\n')
    os.environ["RK_TEST_FAKE_SECRET"] = secret
    search = (
        "import gc, glob, os, re\n"
        "PAT = re.compile(rb'SECRET-[0-9a-f]{32}')\n"
        "def hunt():\n"
        f"    for path in [{str(dataset)!r}] + glob.glob('/proc/*/cmdline') + "
        "glob.glob('/proc/*/environ'):\n"
        "        try:\n"
        "            m = PAT.search(open(path, 'rb').read())\n"
        "            if m: return m.group().decode()\n"
        "        except Exception: pass\n"
        "    for maps in glob.glob('/proc/*/maps'):\n"
        "        try:\n"
        "            mem = open(maps[:-4] + 'mem', 'rb', 0)\n"
        "            for line in open(maps):\n"
        "                lo, hi = (int(x, 16) for x in line.split()[0].split('-'))\n"
        "                if 'r' not in line.split()[1] or hi - lo > 1 << 26: continue\n"
        "                try:\n"
        "                    mem.seek(lo); m = PAT.search(mem.read(hi - lo))\n"
        "                    if m: return m.group().decode()\n"
        "                except Exception: pass\n"
        "        except Exception: pass\n"
        "    for v in os.environ.values():\n"
        "        if 'SECRET-' in v: return v\n"
        "    return 'not found'\n"
        "def add(a, b):\n    return hunt()\n")
    try:
        refs = [{"fn_name": "add", "inputs": [[1, 2]], "outputs": [secret]},
                {"test": f"def check(candidate):\n    assert candidate(1, 2) == {secret!r}\n",
                 "entry_point": "add"},
                {"test": f"assert add(1, 2) == {secret!r}\n"}]
        scores = verifier.score([Sample("", search, r) for r in refs])
    finally:
        del os.environ["RK_TEST_FAKE_SECRET"]
    assert [s.value for s in scores] == [0.0, 0.0, 0.0], [s.info for s in scores]
    assert "not found" in scores[0].info["first_failure"]
