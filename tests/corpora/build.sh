#!/usr/bin/env bash
# Build the quality corpora for `quorum bench quality` from public suites with ground truth,
# fetched from PyPI (needs network and python3; not run in CI):
#
#   bandit  — the bandit sdist's examples/ (its functional tests' inputs), keyed by what bandit
#             itself reports on each file (test id, line range), medium and high severity only;
#   pylint  — the pylint sdist's tests/functional files for a few bug classes
#             (used-before-assignment, undefined-variable, unreachable, dangerous-default-value),
#             keyed by their .txt expectations, with the `# [symbol]` hints and `# pylint:`
#             pragmas cut from the code (lines keep their numbers, so the key stays true).
#
# Usage: tests/corpora/build.sh [OUT_DIR]     (default ~/.cache/quorum/corpora)
# Then:  quorum bench quality --corpus OUT_DIR/bandit    (and OUT_DIR/pylint)
set -euo pipefail
OUT="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/quorum/corpora}"
BANDIT_VERSION=1.7.10
PYLINT_VERSION=3.3.1
# Files per corpus, so a review by a small local model stays in minutes.
BANDIT_FILES="${BANDIT_FILES:-14}"
PYLINT_FILES_PER_SYMBOL="${PYLINT_FILES_PER_SYMBOL:-3}"

command -v python3 >/dev/null || { echo "build.sh: python3 is needed" >&2; exit 2; }
mkdir -p "$OUT"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
echo "build.sh: fetching bandit $BANDIT_VERSION and pylint $PYLINT_VERSION sources from PyPI" >&2
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" -q install "bandit==$BANDIT_VERSION"
"$WORK/venv/bin/pip" -q download --no-deps --no-binary :all: -d "$WORK/sdist" \
    "bandit==$BANDIT_VERSION" "pylint==$PYLINT_VERSION"
tar -xzf "$WORK/sdist/bandit-$BANDIT_VERSION.tar.gz" -C "$WORK"
tar -xzf "$WORK/sdist/pylint-$PYLINT_VERSION.tar.gz" -C "$WORK"

BANDIT="$WORK/venv/bin/bandit" SRC_BANDIT="$WORK/bandit-$BANDIT_VERSION" \
SRC_PYLINT="$WORK/pylint-$PYLINT_VERSION" OUT="$OUT" BANDIT_FILES="$BANDIT_FILES" \
PYLINT_FILES_PER_SYMBOL="$PYLINT_FILES_PER_SYMBOL" BANDIT_VERSION="$BANDIT_VERSION" \
PYLINT_VERSION="$PYLINT_VERSION" python3 - <<'PY'
import json, os, re, shutil, subprocess, pathlib

out = pathlib.Path(os.environ["OUT"])

def write_corpus(name, source, answers, files_dir):
    lines = [f"# Built by tests/corpora/build.sh; do not edit.", f"name: {name}",
             f"source: {json.dumps(source)}", "target: files", "answers:"]
    for a in answers:
        lines.append("  - " + json.dumps(a))
    (out / name / "corpus.yaml").write_text("\n".join(lines) + "\n")
    print(f"build.sh: {name}: {len(answers)} answers in {len(list(files_dir.iterdir()))} files -> {out / name}")

def fresh(name):
    d = out / name
    shutil.rmtree(d, ignore_errors=True)
    (d / "files").mkdir(parents=True)
    return d / "files"

# --- bandit -----------------------------------------------------------------------------------
KEYWORDS = {
    "hardcoded_sql_expressions": ["sql"],
    "hardcoded_password_string": ["password", "secret", "credential", "hard-coded", "hardcoded"],
    "hardcoded_password_funcarg": ["password", "secret", "credential", "hard-coded", "hardcoded"],
    "hardcoded_password_default": ["password", "secret", "credential", "hard-coded", "hardcoded"],
    "hardcoded_tmp_directory": ["tmp", "temp"],
    "hardcoded_bind_all_interfaces": ["0.0.0.0", "bind", "interface"],
    "exec_used": ["exec"],
    "flask_debug_true": ["debug"],
    "jinja2_autoescape_false": ["autoescape", "escap", "xss"],
    "request_with_no_cert_validation": ["verif", "certificate", "tls", "ssl"],
    "request_without_timeout": ["timeout"],
    "tarfile_unsafe_members": ["tar", "extract", "traversal"],
    "yaml_load": ["yaml", "deserial", "unsafe load"],
    "start_process_with_a_shell": ["shell", "command"],
    "subprocess_popen_with_shell_equals_true": ["shell", "command"],
    "any_other_function_with_shell_equals_true": ["shell", "command"],
    "start_process_with_no_shell": ["process", "command", "exec"],
    "start_process_with_partial_path": ["path", "process", "command"],
    "weak_cryptographic_key": ["key size", "weak", "rsa", "dsa", "bits"],
    "ssl_with_bad_version": ["ssl", "tls", "protocol"],
    "hashlib_insecure_functions": ["md5", "sha1", "sha-1", "weak hash", "hash"],
}
# bandit's blacklist calls share one test name; their test id says which call it is.
BLACKLIST = {
    "B301": ("pickle", ["pickle", "deserial"]), "B302": ("marshal", ["marshal", "deserial"]),
    "B303": ("insecure-hash", ["md5", "sha1", "sha-1", "weak hash", "hash"]),
    "B304": ("insecure-cipher", ["cipher", "crypt", "des", "rc4", "arc"]),
    "B305": ("insecure-cipher-mode", ["ecb", "cipher mode", "mode"]),
    "B306": ("mktemp", ["mktemp", "temp", "race"]), "B307": ("eval", ["eval"]),
    "B308": ("mark-safe", ["mark_safe", "xss", "escap"]), "B310": ("urlopen", ["url", "scheme", "file://"]),
    "B311": ("random", ["random", "predictable"]), "B312": ("telnet", ["telnet", "cleartext", "plaintext"]),
    "B321": ("ftp", ["ftp", "cleartext", "plaintext"]),
    "B323": ("unverified-context", ["verif", "certificate", "ssl", "tls"]),
    "B324": ("insecure-hash", ["md5", "sha1", "sha-1", "weak hash", "hash"]),
}
for xml_id in ("B313", "B314", "B315", "B316", "B317", "B318", "B319", "B320"):
    BLACKLIST[xml_id] = ("xml", ["xml", "xxe", "entity", "entities"])

src = pathlib.Path(os.environ["SRC_BANDIT"]) / "examples"
picked = []
for f in sorted(src.glob("*.py")):
    if f.name in ("__init__.py", "okay.py", "nosec.py", "skip.py") or f.name.startswith(("imports", "new_candidates")):
        continue
    picked.append(f)
files = fresh("bandit")
answers = []
kept = 0
for f in picked:
    if kept >= int(os.environ["BANDIT_FILES"]):
        break
    run = subprocess.run([os.environ["BANDIT"], "-q", "-f", "json", str(f)], capture_output=True, text=True)
    try:
        results = json.loads(run.stdout)["results"]
    except (ValueError, KeyError):
        continue
    hits = []
    for r in results:
        if r["issue_severity"] not in ("MEDIUM", "HIGH") or r["test_id"] in ("B101",) or r["test_id"].startswith("B4"):
            continue
        name = r["test_name"]
        words = KEYWORDS.get(name)
        if r["test_id"] in BLACKLIST:
            call, words = BLACKLIST[r["test_id"]]
            name = f"{r['test_id']}-{call}"
        if words is None:
            words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if len(w) > 2]
        lr = r.get("line_range") or [r["line_number"]]
        hits.append({"file": f.name, "lines": [min(lr), max(lr)],
                     "category": f"security/{name}", "keywords": words})
    if not hits:
        continue
    # A neutral name: bandit's own file names say what is wrong in them.
    neutral = f"example_{kept + 1:02d}.py"
    shutil.copy(f, files / neutral)
    for h in hits:
        h["file"] = neutral
    answers.extend(hits)
    kept += 1
v = os.environ["BANDIT_VERSION"]
write_corpus("bandit", f"bandit {v} sdist examples/ (Apache-2.0), keyed by bandit {v}'s own findings (medium/high severity)", answers, files)

# --- pylint -----------------------------------------------------------------------------------
SYMBOLS = {
    "used-before-assignment": ["before assignment", "unbound", "undefined", "not defined", "referenced before"],
    "undefined-variable": ["undefined", "not defined", "nameerror", "unknown name"],
    "unreachable": ["unreachable", "dead code", "never executed", "never run"],
    "dangerous-default-value": ["mutable default", "default argument", "default value", "shared default"],
}
func = pathlib.Path(os.environ["SRC_PYLINT"]) / "tests" / "functional"
files = fresh("pylint")
answers = []
per = int(os.environ["PYLINT_FILES_PER_SYMBOL"])
hint = re.compile(r"\s*#\s*\[[a-z0-9, -]+\]")
pragma = re.compile(r"\s*#\s*pylint:.*$")
for symbol, words in SYMBOLS.items():
    taken = 0
    for txt in sorted(func.rglob("*.txt")):
        if taken >= per:
            break
        py = txt.with_suffix(".py")
        if not py.is_file() or txt.with_suffix(".rc").exists():
            continue
        try:
            expected = [l.split(":") for l in txt.read_text().splitlines() if l.startswith(symbol + ":")]
            code = py.read_text().splitlines()
        except UnicodeDecodeError:
            continue
        if not expected or len(code) > 200:
            continue
        # A neutral name: pylint's file names say what is wrong in them.
        name = f"module_{len(list(files.iterdir())) + 1:02d}.py"
        clean = [pragma.sub("", hint.sub("", l)) for l in code]
        (files / name).write_text("\n".join(clean) + "\n")
        for e in expected:
            first = int(e[1]); last = int(e[3]) if e[3].isdigit() else first
            answers.append({"file": name, "lines": [first, max(first, last)],
                            "category": f"correctness/{symbol}", "keywords": words})
        taken += 1
v = os.environ["PYLINT_VERSION"]
write_corpus("pylint", f"pylint {v} sdist tests/functional (GPL-2.0), keyed by their .txt expectations; hints and pragmas stripped", answers, files)
PY
echo "build.sh: done; run: quorum bench quality --corpus $OUT/bandit (or $OUT/pylint)" >&2
