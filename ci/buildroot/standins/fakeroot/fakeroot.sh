#!/bin/sh
# Buildroot's host fakeroot, standing in: Debian's (ci/buildroot/standins/fakeroot).
exec /usr/bin/fakeroot "$@"
