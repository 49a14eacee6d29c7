#!/bin/sh
# Builds the C reference (zeromq/dafka) and the five drivers bench/c_reference.py runs
# (c_tower, c_store, c_producer, c_consumer, c_latency: their sources are next to it) into
# $OUT/bin (default build/c-reference/bin, under the repository; `make c-reference`).
#
# The C Dafka needs CZMQ's draft API (zsock_set_xpub_welcome_msg..., zconfig_get with
# drafts), which Debian's libczmq-dev is built without: CZMQ is built here from source with
# ENABLE_DRAFTS=ON and installed into $OUT/prefix, then Dafka against it. Everything else
# comes from Debian packages:
#   apt-get install build-essential cmake git pkg-config libzmq3-dev libleveldb-dev
# Sources are cloned at the commits the figures in docs/performance.md were measured with
# (override CZMQ_GIT/CZMQ_REF, DAFKA_GIT/DAFKA_REF: a local clone's path works as *_GIT).
# Nothing is installed system-wide; run bench/c_reference.py --c-bin $OUT/bin.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${OUT:-$root/build/c-reference}
CZMQ_GIT=${CZMQ_GIT:-https://github.com/zeromq/czmq.git}
CZMQ_REF=${CZMQ_REF:-b669c7eb60cb8f587071ac6ece7cd68d30ac4017}
DAFKA_GIT=${DAFKA_GIT:-https://github.com/zeromq/dafka.git}
DAFKA_REF=${DAFKA_REF:-c2dc88d0698ce157562378e8386060709e861a96}
JOBS=${JOBS:-2}

missing=""
for tool in cc cmake git pkg-config make; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
pkg-config --exists libzmq 2>/dev/null || missing="$missing libzmq3-dev"
[ -f /usr/include/leveldb/c.h ] || missing="$missing libleveldb-dev"
if [ -n "$missing" ]; then
    echo "bench/c/build.sh: missing:$missing" >&2
    echo "install: apt-get install build-essential cmake git pkg-config libzmq3-dev libleveldb-dev" >&2
    exit 1
fi

checkout() {  # checkout NAME URL REF: $OUT/src/NAME at REF
    dir="$OUT/src/$1"
    if [ ! -d "$dir/.git" ]; then
        mkdir -p "$OUT/src"
        git clone --quiet "$2" "$dir"
    fi
    if ! git -C "$dir" checkout --quiet "$3" 2>/dev/null; then
        git -C "$dir" fetch --quiet origin
        git -C "$dir" checkout --quiet "$3"
    fi
}

prefix="$OUT/prefix"
if [ ! -f "$prefix/lib/libczmq.so" ] || [ ! -f "$prefix/.czmq-$CZMQ_REF" ]; then
    checkout czmq "$CZMQ_GIT" "$CZMQ_REF"
    cmake -S "$OUT/src/czmq" -B "$OUT/build/czmq" -DCMAKE_BUILD_TYPE=Release \
        -DENABLE_DRAFTS=ON -DBUILD_TESTING=OFF -DCZMQ_BUILD_STATIC=OFF \
        -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
    cmake --build "$OUT/build/czmq" -j "$JOBS" >/dev/null
    cmake --install "$OUT/build/czmq" >/dev/null
    touch "$prefix/.czmq-$CZMQ_REF"
fi
if [ ! -f "$prefix/lib/libdafka.so" ] || [ ! -f "$prefix/.dafka-$DAFKA_REF" ]; then
    checkout dafka "$DAFKA_GIT" "$DAFKA_REF"
    rm -rf "$OUT/build/dafka"  # its cache may name the system's CZMQ
    # pkg-config must find this CZMQ first: the system's libczmq.pc omits the draft define
    # and Debian's libzmq is built without drafts: the tower's one libzmq draft name (a
    # message property's name, read through the stable zmq_msg_gets) is given here
    PKG_CONFIG_PATH="$prefix/lib/pkgconfig" cmake -S "$OUT/src/dafka" -B "$OUT/build/dafka" \
        -DCMAKE_C_FLAGS='-DZMQ_MSG_PROPERTY_PEER_ADDRESS=\"Peer-Address\"' -DCMAKE_BUILD_TYPE=Release \
        -DENABLE_DRAFTS=ON -DBUILD_TESTING=OFF -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
    cmake --build "$OUT/build/dafka" -j "$JOBS" --target dafka >/dev/null
    mkdir -p "$prefix/lib" "$prefix/include"
    cp -P "$OUT/build/dafka"/libdafka.so* "$prefix/lib/"
    cp "$OUT/src/dafka/include"/*.h "$prefix/include/"
    touch "$prefix/.dafka-$DAFKA_REF"
fi

mkdir -p "$OUT/bin"
for driver in c_tower c_store c_producer c_consumer c_latency; do
    cc -O2 -Wall -DCZMQ_BUILD_DRAFT_API=1 -DDAFKA_BUILD_DRAFT_API=1 \
        -o "$OUT/bin/$driver" "$here/$driver.c" -I"$prefix/include" \
        -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -ldafka -lczmq -lzmq
done
echo "built: $OUT/bin/{c_tower,c_store,c_producer,c_consumer,c_latency}"
echo "run:   .venv/bin/python bench/c_reference.py --c-bin $OUT/bin"
