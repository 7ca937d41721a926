"""A C/C++ program run on many inputs (the test cases of one sample) is compiled once: every run
starts the same binary, so a compile, honest or a compile bomb, costs its limits once per sample
rather than once per case."""
from __future__ import annotations

import pytest

from rewardkit.sandboxes import Limits, Program, Sandbox, available_languages
from rewardkit.sandboxes.forkserver import ForkServer
from rewardkit.verifiers.code import CodeVerifier

pytestmark = pytest.mark.skipif(not available_languages()["c"], reason="gcc is not installed")

ADD = "#include <stdio.h>\nint main(){long a,b; if(scanf(\"%ld %ld\",&a,&b)!=2) return 1;" \
      " printf(\"%ld\\n\",a+b); return 0;}\n"
LIMITS = Limits(cpu_s=2, wall_s=10, memory_mb=256)


@pytest.fixture
def compiles(monkeypatch):
    """The compile steps the fork servers are asked to run, counted."""
    seen = []
    submit = ForkServer.submit

    def counting(self, request, fds, **options):
        if request.get("mode") == "compile":
            seen.append(request["argv"][0])
        return submit(self, request, fds, **options)

    monkeypatch.setattr(ForkServer, "submit", counting)
    return seen


def test_one_program_on_six_inputs_is_compiled_once(compiles):
    with Sandbox(pool_size=2, limits=LIMITS) as sb:
        results = sb.run_many([Program(ADD, "c", stdin=f"{i} {i}\n") for i in range(6)])
    assert [r.stdout for r in results] == [f"{2 * i}\n" for i in range(6)]
    assert len(compiles) == 1
    assert all(r.compile is not None and r.compile.status == "ok" for r in results)


def test_a_failed_compile_fails_every_input_once(compiles):
    with Sandbox(pool_size=2, limits=LIMITS) as sb:
        results = sb.run_many([Program("int main( {", "cpp", stdin=str(i)) for i in range(4)]
                              + [Program(ADD, "c", stdin="1 2")])
    assert [r.status for r in results] == ["compile_error"] * 4 + ["ok"]
    assert "error" in results[0].compile.stderr
    assert len(compiles) == 2  # one per distinct program


def test_the_code_reward_compiles_a_c_sample_once_for_all_its_cases(compiles):
    ref = {"inputs": [f"{i} 1\n" for i in range(6)], "outputs": [f"{i + 1}\n" for i in range(6)]}
    with CodeVerifier(pool_size=2, language="c") as verifier:
        score = verifier.score([{"prompt": "", "completion": ADD, "reference": ref}])[0]
    assert score.value == 1.0, score.info
    assert len(compiles) == 1


def test_a_sandbox_failure_while_compiling_is_a_sandbox_error_for_every_input(monkeypatch):
    """Where the compiled program cannot be taken back from the compile step, the sandbox
    failed, not the program: never a compile_error, which scores as the candidate's fault."""
    from rewardkit.sandboxes import run as run_module

    def lost(self):
        raise OSError("the compiled program vanished")

    monkeypatch.setattr(run_module.RunHandle, "_read_binary", lost)
    with Sandbox(pool_size=2, limits=LIMITS) as sb:
        results = sb.run_many([Program(ADD, "c", stdin="1 2") for _ in range(3)])
    assert [r.status for r in results] == ["sandbox_error"] * 3
    assert all("vanished" in r.error for r in results)
