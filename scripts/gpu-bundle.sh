#!/usr/bin/env bash
# gpu-bundle.sh: gathers into DIR, from this machine's installed Debian 12 packages (no download),
# what scripts/gpu-check.sh needs on a GPU node that has CUDA, CMake, a C++ compiler and a Python
# with torch and pybind11, but none of the project's Debian packages and no network:
#   prefix/include     Boost.Math (the headers the project's sources reach, all of boost/config),
#                      HDF5 (serial), FFTW3, zlib, CLI11, nlohmann-json
#   prefix/lib         libhdf5_serial and libfftw3f with the link names CMake looks for;
#                      libz.so for linking only (no libz.so.1 beside it: the node's own one runs);
#                      hdf5/plugins/libh5lz4.so (hdf5-filter-plugin's LZ4 filter)
#   prefix/lib/deps    every library those need, less glibc's, libstdc++, libgcc_s and libz, which
#                      any node that runs Python and torch has; gpu-check.sh takes one from here
#                      only where the node lacks it
#   prefix/lib/cmake, prefix/share/cmake, prefix/lib/pkgconfig: the packages' config files, made
#                      to point into prefix wherever it lies
#   prefix/bin/pkg-config  Debian's pkgconf, wrapped to read prefix's .pc files only
#   src/googletest     GoogleTest's source (gpu-check.sh builds it there)
#   MANIFEST.txt       what came from which package and version, and what was left out
# Usage: scripts/gpu-bundle.sh [DIR]    DIR: default gpu-bundle in the repository root; replaced
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${1:-}" in -h|--help) sed -n '2,21p' "${BASH_SOURCE[0]}"; exit 0 ;; esac
[[ $# -le 1 ]] || { echo "gpu-bundle: error: one folder only (see --help)" >&2; exit 1; }
DIR="${1:-${ROOT}/gpu-bundle}"
ARCH_LIB=/usr/lib/x86_64-linux-gnu
die() { echo "gpu-bundle: error: $*" >&2; exit 1; }

# Every package the bundle takes files from; scripts/setup.sh installs them.
PACKAGES=(libboost1.74-dev libboost-math1.74-dev libhdf5-dev libhdf5-103-1 hdf5-filter-plugin
          libfftw3-dev libfftw3-single3 zlib1g-dev libcli11-dev nlohmann-json3-dev googletest
          pkgconf-bin libpkgconf3)
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || die "Debian package $p is not installed (scripts/setup.sh installs what the bundle needs)"
done
command -v g++ >/dev/null || die "g++ not found (it lists the Boost headers the sources reach)"

rm -rf "${DIR}"
P="${DIR}/prefix"
mkdir -p "${P}"/{bin,libexec,include,lib/deps,lib/hdf5/plugins,lib/cmake,lib/pkgconfig,share/cmake} "${DIR}/src"
MANIFEST="${DIR}/MANIFEST.txt"
{
  # shellcheck source=/dev/null
  echo "gradscope GPU bundle: made by scripts/gpu-bundle.sh on $(. /etc/os-release && echo "${PRETTY_NAME}"), $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "commit: $(git -C "${ROOT}" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo "packages the files come from:"
  for p in "${PACKAGES[@]}"; do echo "  $p $(dpkg-query -W -f='${Version}' "$p")"; done
  echo
} > "${MANIFEST}"
note() { echo "$*" >> "${MANIFEST}"; }

# ---- Boost.Math: the headers that the sources including Boost reach (g++ -M, for C++20 and
# C++23, missing generated headers allowed), plus all of boost/config, where another compiler or
# standard library takes other files.
mapfile -t boost_users < <(cd "${ROOT}" || exit; grep -rl --include='*.cpp' --include='*.hpp' --include='*.cu' \
                             '#include <boost/' base fitting kernels compress data analyzer cli python train 2>/dev/null || true)
[[ ${#boost_users[@]} -gt 0 ]] || die "no source includes <boost/...>: nothing to collect"
includes=()
for d in "${ROOT}"/*/include "${ROOT}"/train/distributed/include; do [[ -d "$d" ]] && includes+=(-I"$d"); done
boost_list="$(mktemp)"
trap 'rm -f "${boost_list}"' EXIT
for std in c++20 c++23; do
  for src in "${boost_users[@]}"; do
    g++ -std="${std}" -M -MG "${includes[@]}" "${ROOT}/${src}"
  done
done | tr ' ' '\n' | grep '^/usr/include/boost/' | sort -u > "${boost_list}"
find /usr/include/boost/config /usr/include/boost/version.hpp -type f >> "${boost_list}"
sort -u -o "${boost_list}" "${boost_list}"
# One copy for them all (a cp a header was 700 processes), each under its path below /usr/include.
sed 's|^/usr/include/||' "${boost_list}" | (cd /usr/include && xargs -d '\n' cp --parents -t "${P}/include")
for d in Boost-1.74.0 boost_headers-1.74.0; do cp -r "${ARCH_LIB}/cmake/$d" "${P}/lib/cmake/"; done
# Debian's config finds the headers three folders above lib/x86_64-linux-gnu/cmake; here lib/cmake.
sed -i 's|${_BOOST_CMAKEDIR}/../../../include/|${_BOOST_CMAKEDIR}/../../include/|' \
    "${P}/lib/cmake/boost_headers-1.74.0/boost_headers-config.cmake"
grep -q '_BOOST_CMAKEDIR}/../../include/' "${P}/lib/cmake/boost_headers-1.74.0/boost_headers-config.cmake" \
  || die "Boost's boost_headers-config.cmake changed: its include path was not rewritten"
note "Boost: $(wc -l < "${boost_list}") headers reached from ${boost_users[*]} (g++ -M, C++20 and C++23) and boost/config; Boost's CMake configs"

# ---- HDF5 (serial, C), its LZ4 filter, FFTW3 single precision, zlib for linking.
cp /usr/include/hdf5/serial/*.h "${P}/include/"
cp -L "${ARCH_LIB}/libhdf5_serial.so.103" "${P}/lib/"
ln -s libhdf5_serial.so.103 "${P}/lib/libhdf5.so"          # FindHDF5 looks for hdf5
ln -s libhdf5_serial.so.103 "${P}/lib/libhdf5_serial.so"
lz4_plugin="$(dpkg -L hdf5-filter-plugin | grep '/libh5lz4\.so$' | head -1)"
[[ -n "${lz4_plugin}" ]] || die "hdf5-filter-plugin holds no libh5lz4.so"
cp -L "${lz4_plugin}" "${P}/lib/hdf5/plugins/"
cp /usr/include/fftw3.h "${P}/include/"
cp -L "${ARCH_LIB}/libfftw3f.so.3" "${P}/lib/"
ln -s libfftw3f.so.3 "${P}/lib/libfftw3f.so"
# shellcheck disable=SC2016  # ${pcfiledir} and ${prefix} are pkg-config's, not the shell's
sed -e 's|^prefix=.*|prefix=${pcfiledir}/../..|' -e 's|^libdir=.*|libdir=${prefix}/lib|' \
    "${ARCH_LIB}/pkgconfig/fftw3f.pc" > "${P}/lib/pkgconfig/fftw3f.pc"
cp /usr/include/zlib.h /usr/include/zconf.h "${P}/include/"
cp -L "${ARCH_LIB}/libz.so" "${P}/lib/libz.so"   # no libz.so.1 here: at run time the node's own
note "HDF5 $(dpkg-query -W -f='${Version}' libhdf5-dev): headers, libhdf5_serial.so.103; LZ4 filter $(basename "${lz4_plugin}")"
note "FFTW3 $(dpkg-query -W -f='${Version}' libfftw3-dev): fftw3.h, libfftw3f.so.3, fftw3f.pc (prefix from its own folder)"
note "zlib: zlib.h, zconf.h and libz.so, to link against; the node's libz.so.1 runs"

# ---- header-only CLI11 and nlohmann-json with their CMake configs (relative to their folder).
cp -r /usr/include/CLI /usr/include/nlohmann "${P}/include/"
cp -r /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json "${P}/share/cmake/"
note "CLI11 $(dpkg-query -W -f='${Version}' libcli11-dev), nlohmann-json $(dpkg-query -W -f='${Version}' nlohmann-json3-dev): headers, CMake configs"

# ---- pkg-config: Debian's pkgconf behind a wrapper that reads prefix's .pc files only.
cp -L /usr/bin/pkgconf "${P}/libexec/pkgconf"
cat > "${P}/bin/pkg-config" <<'SH'
#!/bin/sh
# Debian's pkgconf (scripts/gpu-bundle.sh), reading this prefix's .pc files only.
here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
LD_LIBRARY_PATH="$here/../lib/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
PKG_CONFIG_LIBDIR="$here/../lib/pkgconfig" PKG_CONFIG_PATH='' exec "$here/../libexec/pkgconf" "$@"
SH
chmod +x "${P}/bin/pkg-config"
note "pkg-config: pkgconf $(dpkg-query -W -f='${Version}' pkgconf-bin), wrapped"

# ---- GoogleTest as source.
cp -r /usr/src/googletest "${DIR}/src/"
note "GoogleTest $(dpkg-query -W -f='${Version}' googletest): source (/usr/src/googletest)"

# ---- the libraries all of the above need (ldd walks the whole tree), less those any Linux node
# that runs Python and torch has: glibc's (the node's is newer: 2.39 on Ubuntu 24.04 against
# Debian 12's 2.36, and glibc runs what was built against an older one), libstdc++ and libgcc_s
# (torch needs them), libz.so.1 (Python and torch load it).
LEFT_OUT='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1|libanl\.so\.1|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libz\.so\.1)$'
left_out=() taken=() files=()
while read -r soname path; do
  [[ "${path}" != "not" ]] || die "${soname}, needed by a library of the bundle, is not found on this machine"
  if [[ "${soname}" =~ ${LEFT_OUT} ]]; then left_out+=("${soname}"); continue; fi
  [[ -e "${P}/lib/${soname}" || -e "${P}/lib/deps/${soname}" ]] && continue
  cp -L "${path}" "${P}/lib/deps/${soname}"
  taken+=("${soname}") files+=("$(readlink -f "${path}")")
done < <(for f in "${P}/lib/libhdf5_serial.so.103" "${P}/lib/libfftw3f.so.3" "${P}/lib/hdf5/plugins/"*.so \
                  "${P}/libexec/pkgconf"; do
           LD_LIBRARY_PATH="${P}/lib" ldd "$f" | awk '$2 == "=>" {print $1, $3}'
         done | sort -u)
# The packages they came from, in one query by exact path (a glob costs dpkg a pass over every
# file it knows, half a second each), as installed or, merged into /usr since, as packaged.
if (( ${#files[@]} )); then
  paths=()
  for f in "${files[@]}"; do paths+=("$f"); [[ "$f" == /usr/* ]] && paths+=("${f#/usr}"); done
  owners="$(dpkg -S "${paths[@]}" 2>/dev/null || true)"
  for i in "${!taken[@]}"; do
    owner=""
    while read -r line; do
      if [[ "${line}" == *"/$(basename "${files[i]}")" ]]; then owner="${line%%:*}"; break; fi
    done <<< "${owners}"
    note "  deps/${taken[i]}: ${owner}"
  done
fi
note "left out (every node that runs Python and torch has them): $(printf '%s\n' "${left_out[@]}" | sort -u | paste -sd' ')"

size_kib="$(du -sk "${DIR}" | cut -f1)"
note ""
note "size: $((size_kib / 1024)) MiB (${size_kib} KiB), $(find "${DIR}" -type f | wc -l) files"
(( size_kib <= 56 * 1024 )) || die "the bundle holds ${size_kib} KiB, more than the 56 MiB it may take"
echo "gpu-bundle: ${DIR}: $((size_kib / 1024)) MiB in $(find "${DIR}" -type f | wc -l) files (${MANIFEST})"
