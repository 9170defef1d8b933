#!/bin/sh
# Rebuilds the fixtures from fixture.c (gcc, systemtap-sdt-dev).
set -e
cd "$(dirname "$0")"
gcc -O2 -g0 -no-pie -rdynamic -o usdt.elf fixture.c
gcc -O2 -g0 -no-pie -rdynamic -DWITH_GC_COLLECT_MAIN -o usdt-gcmain.elf fixture.c
strip usdt.elf usdt-gcmain.elf
