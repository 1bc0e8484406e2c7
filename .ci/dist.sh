#!/usr/bin/env bash
# `make dist`: a self-contained tarball of updraft and updraft-bench for Linux hosts without Swift.
#
#   .ci/dist.sh BIN_DIR OUT_DIR     (BIN_DIR: a release build made with --static-swift-stdlib)
#
# Writes OUT_DIR/updraft-VERSION-linux-ARCH.tar.xz holding
#   bin/updraft, bin/updraft-bench   launchers (bash): the bundled libraries first on the library path,
#                                    and a vendor OpenCL driver the host has but /etc/OpenCL/vendors
#                                    does not name (as NVIDIA's container images often are) registered
#   libexec/                         the stripped executables, Swift's standard library linked in
#   lib/                             the shared libraries they need that a bare host may lack
#                                    (OpenCL loader, OpenBLAS and its Fortran runtime, libpng, libjpeg, libdeflate, ...);
#                                    glibc, libstdc++ and libgcc_s stay behind: every host has them
# and puts a copy in .device/ with a run.sh that unpacks it on first use, for the GPU host's check
# script (`bash .device/run.sh PRODUCT ARGS...`; the device tool carries .device/, 64 MiB at most).
set -euo pipefail
bin_dir=$1; out_dir=$2
root=$(cd "$(dirname "$0")/.." && pwd)
version=$("$bin_dir/updraft" --version | awk '{print $2}')
name="updraft-$version-linux-$(uname -m)"
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
tree="$stage/$name"
mkdir -p "$tree/bin" "$tree/libexec" "$tree/lib"
for p in updraft updraft-bench; do
  strip -o "$tree/libexec/$p" "$bin_dir/$p"
  if ldd "$bin_dir/$p" | grep -q 'libswift\|libFoundation'; then
    echo "dist: $p links the Swift runtime dynamically; build it with --static-swift-stdlib" >&2; exit 1
  fi
  ldd "$bin_dir/$p" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libresolv.so*|libutil.so*) ;;
      *) cp -Ln "$lib" "$tree/lib/" ;;
    esac
  done
  cat > "$tree/bin/$p" <<LAUNCHER
#!/usr/bin/env bash
# Runs the bundled $p with the libraries beside it (see README in this folder).
here=\$(cd "\$(dirname "\$(readlink -f "\${BASH_SOURCE[0]}")")/.." && pwd)
export LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
source "\$here/lib/opencl-vendors.sh"
exec "\$here/libexec/$p" "\$@"
LAUNCHER
  chmod +x "$tree/bin/$p"
done
cat > "$tree/lib/opencl-vendors.sh" <<'VENDORS'
# Sourced by the launchers. The OpenCL ICD loader finds drivers through /etc/OpenCL/vendors/*.icd.
# GPU containers often mount NVIDIA's driver (libnvidia-opencl.so.1) without an .icd file naming it:
# then list the host's .icd files and that driver in a private folder and point the loader at it.
# OCL_ICD_VENDORS set by the user wins.
if [ -z "${OCL_ICD_VENDORS:-}" ] && ! grep -qs nvidia /etc/OpenCL/vendors/*.icd; then
  for drv in /usr/local/nvidia/lib64/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 \
             /usr/lib64/libnvidia-opencl.so.1 /usr/lib/libnvidia-opencl.so.1 \
             "$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl.so.1/{print $NF; exit}')"; do
    [ -n "$drv" ] && [ -e "$drv" ] || continue
    vendors=$(mktemp -d "${TMPDIR:-/tmp}/updraft-ocl-vendors.XXXXXX")
    cp /etc/OpenCL/vendors/*.icd "$vendors/" 2>/dev/null
    echo "$drv" > "$vendors/nvidia-updraft.icd"
    export OCL_ICD_VENDORS=$vendors
    case ":${LD_LIBRARY_PATH:-}:" in *":$(dirname "$drv"):"*) ;; *) export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$drv")" ;; esac
    break
  done
fi
VENDORS
cat > "$tree/README" <<README
Updraft $version ($("$bin_dir/updraft" --version | sed 's/^updraft //'))
Unpack anywhere and run bin/updraft (or put bin/ on PATH): no Swift toolchain is needed.
  bin/updraft devices          # the OpenCL devices found, and the CPU
  bin/updraft --help
OpenCL drivers come from the host (/etc/OpenCL/vendors, or NVIDIA's libnvidia-opencl.so.1, which the
launcher registers when the host's list lacks it); without one, training runs on the CPU.
README
mkdir -p "$out_dir"
XZ_OPT="-6 -T0" tar -C "$stage" -cJf "$out_dir/$name.tar.xz" "$name"
rm -rf "$root/.device"; mkdir -p "$root/.device"
cp "$out_dir/$name.tar.xz" "$root/.device/"
cat > "$root/.device/run.sh" <<RUN
#!/usr/bin/env bash
# bash .device/run.sh PRODUCT ARGS...: runs a product of the bundled tarball, unpacked on first use.
here=\$(cd "\$(dirname "\$0")" && pwd)
[ -x "\$here/$name/bin/updraft" ] || tar -C "\$here" -xJf "\$here/$name.tar.xz" || exit 1
p=\$1; shift; exec "\$here/$name/bin/\$p" "\$@"
RUN
echo "$out_dir/$name.tar.xz"
