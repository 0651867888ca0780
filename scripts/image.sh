#!/usr/bin/env bash
# The node agent's container image, built offline from a wheelhouse with docker or podman (docs/operator.md:
# "Building the image").
#
#   scripts/image.sh base [--tag NAME]           a Debian bookworm base with python3 and Graphviz, made from
#                                                Debian's packages by mmdebstrap (no registry needed)
#   scripts/image.sh build [options]             the image; prints its size
#       --base IMAGE       the Python base (default python:3.11-slim-bookworm; a local one from `base`)
#       --tag NAME         the image's name (default ghcr.io/topolink/topolink:VERSION, -cuda for --cuda)
#       --cuda             the CUDA variant (CuPy and NCCL for the GPU probes) instead of the CPU one
#       --both             the CPU image and the CUDA variant, each size printed
#       --wheelhouse DIR   keep the wheelhouse in DIR (default: a temporary folder, removed after)
#
# The wheelhouse is made on this host: topolink's wheel from the working tree and the pinned wheels of
# daemonset/image/requirements*.txt for CPython 3.11 on manylinux (pip download honours HTTPS_PROXY, PIP_INDEX_URL
# and pip.conf); the image build then installs from it with `pip install --no-index`. ENGINE=docker|podman picks
# the engine where both are installed. With podman, CONTAINERS_CONF defaults to daemonset/image/containers.conf
# (runc, cgroupfs, the host's ulimits) where the host's own containers.conf is absent.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-python3}"  # the host's Python with pip, which makes the wheelhouse
die() { echo "image.sh: $*" >&2; exit 2; }

engine="${ENGINE:-}"
if [ -z "$engine" ]; then
    if command -v podman >/dev/null 2>&1; then engine=podman
    elif command -v docker >/dev/null 2>&1; then engine=docker
    else die "neither podman nor docker is installed"; fi
fi
command -v "$engine" >/dev/null 2>&1 || die "$engine is not installed"
if [ "$engine" = podman ] && [ -z "${CONTAINERS_CONF:-}" ] && [ ! -e /etc/containers/containers.conf ]; then
    export CONTAINERS_CONF="$repo/daemonset/image/containers.conf"
fi
# The engine must answer before anything is made (the wheelhouse takes seconds): docker without its daemon,
# or a podman that cannot start, is said at once, with the engine's own first line of complaint.
engine_ready() {
    local why
    if ! why="$(timeout 30 "$engine" info 2>&1 >/dev/null)"; then
        die "$engine does not answer (\`$engine info\` failed: $(printf '%s' "$why" | grep -m1 . || echo 'no reason given')); start it (the docker daemon) or pick the other with ENGINE=podman|docker"
    fi
}

# the distribution's version: pyproject.toml takes it from agent/__init__.py at build time
version="$(sed -n 's/^__version__ = "\([^"]*\)".*/\1/p' "$repo/agent/__init__.py" | head -n1)"
[ -n "$version" ] || die "no __version__ = \"...\" line in $repo/agent/__init__.py: the image's default tag needs it"
arch="$(uname -m)"
python_tag=311  # Debian bookworm's python3, and python:3.11-slim-bookworm's
# What topolink's wheel is built from (tests/test_wheel_install.py builds from the same list)
PACKAGED=(pyproject.toml README.md topology agent probes exporter)

size_mb() {  # the image's uncompressed size as the engine reports it (bytes -> MB, 10^6)
    "$engine" image inspect --format '{{.Size}}' "$1" | awk '{printf "%.1f", $1 / 1e6}'
}

cmd_base() {
    local tag=localhost/topolink-base:bookworm
    while (($#)); do
        case "$1" in
            --tag) tag="${2:?--tag needs a name}"; shift 2 ;;
            *) die "base: unknown option $1" ;;
        esac
    done
    command -v mmdebstrap >/dev/null 2>&1 || die "base: needs mmdebstrap (apt-get install mmdebstrap)"
    # minbase (dpkg, apt, coreutils, ...) plus python3 and what /v1/topology.svg draws with; no documentation,
    # manual pages or translations, and not usrmerge, which set up the merged /usr and pulls in perl (46 MB).
    mmdebstrap --quiet --variant=minbase --aptopt='APT::Install-Recommends "false"' \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --include=python3,graphviz,fonts-dejavu-core \
        --customize-hook='chroot "$1" apt-get -y -qq purge usrmerge libfile-find-rule-perl libnumber-compare-perl libtext-glob-perl perl perl-modules-5.36 libperl5.36 >/dev/null' bookworm - \
        | "$engine" import --change 'CMD ["python3"]' - "$tag" >/dev/null
    echo "base $tag: $(size_mb "$tag") MB (measured: $engine image inspect)"
}

wheelhouse() {  # $1: folder, $2: extras ("" or cuda)
    local out="$1" extras="$2" src name
    mkdir -p "$out"
    # topolink's wheel from a copy of what it packages, so that nothing is written into the working tree
    src="$(mktemp -d)"
    for name in "${PACKAGED[@]}"; do cp -r "$repo/$name" "$src/"; done
    find "$src" -name __pycache__ -prune -exec rm -rf {} +
    "$py" -m pip wheel -q --no-deps --wheel-dir "$out" "$src"
    rm -rf "$src"
    local reqs=("$repo/daemonset/image/requirements.txt")
    [ -z "$extras" ] || reqs+=("$repo/daemonset/image/requirements-$extras.txt")
    local r
    for r in "${reqs[@]}"; do cp "$r" "$out/"; done
    "$py" -m pip download -q --no-deps --only-binary=:all: --implementation cp --python-version 3.11 \
        --abi "cp$python_tag" --platform "manylinux2014_$arch" --platform "manylinux_2_17_$arch" \
        --platform "manylinux_2_27_$arch" --platform "manylinux_2_28_$arch" --dest "$out" "pip==$("$py" -m pip --version | cut -d' ' -f2)" \
        "${reqs[@]/#/-r}"
}

build_one() {  # $1: base, $2: tag, $3: extras, $4: wheelhouse folder
    local base="$1" tag="$2" extras="$3" wh="$4" t0
    wheelhouse "$wh" "$extras"
    t0=$(date +%s)
    # podman keeps no intermediate images (each build's wheelhouse differs, so they would never be reused)
    local layers=()
    [ "$engine" != podman ] || layers=(--layers=false)
    "$engine" build --quiet "${layers[@]}" -f "$repo/daemonset/Dockerfile" --build-arg "PYTHON_IMAGE=$base" \
        --build-arg "EXTRAS=$extras" -t "$tag" "$wh" >/dev/null
    echo "image $tag: $(size_mb "$tag") MB (measured: $engine image inspect, bytecode compiled), built in" \
         "$(($(date +%s) - t0)) s from base $base"
}

cmd_build() {
    local base=python:3.11-slim-bookworm tag="" variants=cpu keep=""
    while (($#)); do
        case "$1" in
            --base) base="${2:?--base needs an image}"; shift 2 ;;
            --tag) tag="${2:?--tag needs a name}"; shift 2 ;;
            --cuda) variants=cuda; shift ;;
            --both) variants="cpu cuda"; shift ;;
            --wheelhouse) keep="${2:?--wheelhouse needs a folder}"; shift 2 ;;
            *) die "build: unknown option $1" ;;
        esac
    done
    local v name extras
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT  # global: the trap runs after this function has returned
    for v in $variants; do
        extras=""; name="${tag:-ghcr.io/topolink/topolink:$version}"
        # the CUDA variant is NAME-cuda, unless --cuda alone was given its own --tag
        if [ "$v" = cuda ]; then extras=cuda; [ -n "$tag" ] && [ "$variants" = cuda ] || name="${name}-cuda"; fi
        build_one "$base" "$name" "$extras" "${keep:-$tmp}/$v"
    done
}

case "${1:-}" in
    base) shift; engine_ready; cmd_base "$@" ;;
    build) shift; engine_ready; cmd_build "$@" ;;
    *) die "usage: scripts/image.sh base [--tag NAME] | build [--base IMAGE] [--tag NAME] [--cuda|--both] [--wheelhouse DIR]" ;;
esac
