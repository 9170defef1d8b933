#!/usr/bin/env bash
# Build one architecture's otelcol-ai image into an OCI layout, without a
# container daemon: a root filesystem from the pinned Debian packages of
# packages.txt (mmdebstrap), the binary, ONNX Runtime and the models, made
# into one layer tar with fixed order, owners and mtimes, and tagged
# <version>-<arch> in the layout with umoci. Run by `make image` (as root:
# mmdebstrap's root mode makes files owned by root).
#
#   build.sh ARCH BINARY ORT_LIB MODELS_DIR VERSION LAYOUT WORKDIR
#
# Environment: SOURCE_DATE_EPOCH (required: every mtime and the image's
# creation time), DEBIAN_MIRROR (default http://deb.debian.org/debian),
# DEBIAN_SECURITY_MIRROR (default http://deb.debian.org/debian-security),
# ORT_VERSION (for the SBOM), IMAGETOOL (the built imagetool binary),
# DEB_CACHE (a folder the downloaded .deb files are kept in between builds;
# apt checks them against the signed indices before use).
set -euo pipefail

[ $# -eq 7 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
arch=$1 bin=$2 ort=$3 models=$4 version=$5 layout=$6 work=$7
: "${SOURCE_DATE_EPOCH:?SOURCE_DATE_EPOCH must be set}"
: "${IMAGETOOL:?IMAGETOOL must name the built imagetool}"
here=$(cd "$(dirname "$0")" && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
suite=bookworm
deb_cache=${DEB_CACHE:-$work/debs}
export LC_ALL=C TZ=UTC

for f in "$bin" "$ort"; do [ -f "$f" ] || { echo "build.sh: $f: not found" >&2; exit 1; }; done
[ -d "$models" ] || { echo "build.sh: $models: not a folder" >&2; exit 1; }
case $arch in
amd64) elf="x86-64" ;;
arm64) elf="ARM aarch64" ;;
*) echo "build.sh: architecture $arch: want amd64 or arm64" >&2; exit 1 ;;
esac
# An image for arm64 with an amd64 binary in it would start nowhere.
for f in "$bin" "$ort"; do
	file -L "$f" | grep -q "ELF 64-bit LSB .*, $elf" || { echo "build.sh: $f is not a linux-$arch ELF: $(file -L "$f")" >&2; exit 1; }
done

libs=() data=()
while read -r kind spec; do
	case $kind in
	lib) libs+=("$spec") ;;
	data) data+=("$spec") ;;
	'' | '#'*) ;;
	*) echo "build.sh: packages.txt: unknown kind $kind" >&2; exit 1 ;;
	esac
done <"$here/packages.txt"

mkdir -p "$work" "$(dirname "$layout")"
work=$(cd "$work" && pwd) layout=$(cd "$(dirname "$layout")" && pwd)/$(basename "$layout")
mm=$work/mmdebstrap-$arch root=$work/rootfs-$arch
rm -rf "$mm" "$root" && mkdir -p "$work" "$deb_cache/$arch"
deb_cache=$(cd "$deb_cache" && pwd)

# The libraries with their dependencies (extract: no scripts run, so no
# emulator is needed for arm64), then (extract hooks: the variant runs no
# customize hooks) the data packages downloaded through the same apt
# configuration. The .deb files stay in the cache folder.
mmdebstrap --quiet --mode=root --variant=extract --architectures="$arch" \
	--include="$(IFS=,; echo "${libs[*]}")" \
	--skip=cleanup/apt/cache \
	--setup-hook='mkdir -p "$1"/var/cache/apt/archives' \
	--setup-hook="sync-in $deb_cache/$arch /var/cache/apt/archives" \
	--extract-hook="cd \"\$1\"/var/cache/apt/archives && APT_CONFIG=\"\$MMDEBSTRAP_APT_CONFIG\" apt-get -o APT::Sandbox::User=root download --quiet=2 ${data[*]}" \
	--extract-hook="sync-out /var/cache/apt/archives $deb_cache/$arch" \
	"$suite" "$mm" \
	"deb $mirror $suite main" "deb $security $suite-security main"

# Exactly the pinned packages, no more (a new dependency must be pinned too).
want=$(for s in "${libs[@]}" "${data[@]}"; do echo "${s%%=*}_${s#*=}"; done | sed 's/:/%3a/' | sort)
got=$(cd "$mm/var/cache/apt/archives" && ls *.deb | sed "s/_\(${arch}\|all\)\.deb\$//" | sort)
if [ "$want" != "$got" ]; then
	echo "build.sh: the packages apt chose are not packages.txt's:" >&2
	diff <(echo "$want") <(echo "$got") >&2 || true
	exit 1
fi

# The image's tree: the libraries' files as mmdebstrap unpacked them, the
# data packages unpacked here, no apt or dpkg state, no device nodes.
mkdir -p "$root"
for d in etc/ld.so.conf.d lib lib64 usr; do
	[ -e "$mm/$d" ] || continue
	mkdir -p "$root/$(dirname "$d")" && cp -a "$mm/$d" "$root/$d"
done
mkdir -p "$root/var/lib/dpkg/status.d" "$root/etc/ssl/certs" "$root/tmp" "$root/root"
for spec in "${data[@]}"; do
	name=${spec%%=*}
	dpkg-deb -x "$mm/var/cache/apt/archives/${name}_${spec#*=}_all.deb" "$root"
done
# What went in, as distroless images record it: one control paragraph per
# package (scanners read var/lib/dpkg/status.d), and the .deb checksums.
(cd "$mm/var/cache/apt/archives" && for deb in *.deb; do
	name=$(dpkg-deb -f "$deb" Package)
	{ dpkg-deb -f "$deb" Package Source Version Architecture Maintainer Installed-Size Depends Homepage; echo "Status: install ok installed"; } \
		>"$root/var/lib/dpkg/status.d/$name"
done)
(cd "$mm/var/cache/apt/archives" && sha256sum *.deb) >"$work/debs-$arch.sha256"
# Only the copyright files of the documentation (the licences' notices).
find "$root/usr/share/doc" -type f ! -name copyright -delete
find "$root/usr/share/doc" -type d -empty -delete
rm -rf "$root/usr/share/lintian" "$root/usr/share/gdb"

# What ca-certificates' and tzdata's maintainer scripts would have done.
find "$root/usr/share/ca-certificates" -name '*.crt' | sort | xargs cat >"$root/etc/ssl/certs/ca-certificates.crt"
ln -s /usr/share/zoneinfo/Etc/UTC "$root/etc/localtime"
echo "Etc/UTC" >"$root/etc/timezone"
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
nonroot:x:65532:
EOF
echo "hosts: files dns" >"$root/etc/nsswitch.conf"
cat >"$root/etc/os-release" <<'EOF'
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
EOF

# The collector, as the README and the chart expect it: libonnxruntime.so.1
# and models/ next to the binary.
app=$root/otelcol-ai
mkdir -p "$app"
install -m 0755 "$bin" "$app/otelcol-ai"
install -m 0644 "$ort" "$app/libonnxruntime.so.1"
cp -R "$models" "$app/models"

"$IMAGETOOL" sbom -rootfs "$root" -debs "$work/debs-$arch.sha256" -arch "$arch" \
	-version "$version" -ort-version "${ORT_VERSION:-}" -suite "$suite" \
	-o "$work/otelcol-ai-$version-linux-$arch.spdx.json"
install -m 0644 "$work/otelcol-ai-$version-linux-$arch.spdx.json" "$app/sbom.spdx.json"

# Fixed modes and mtimes; one layer, entries sorted, owned by 0:0, no
# atime/ctime, then gzip without a name or time (umoci compresses).
chmod -R u+rwX,go+rX,go-w "$root"
chmod 1777 "$root/tmp"
chmod 0700 "$root/root"
find "$root" -depth -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +
layer=$work/layer-$arch.tar
tar --create --file="$layer" --directory="$root" --sort=name --format=posix \
	--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
	--mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner .

created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
tag=$version-$arch
[ -f "$layout/index.json" ] || umoci init --layout "$layout"
umoci new --image "$layout:$tag"
umoci raw add-layer --image "$layout:$tag" --history.created="$created" \
	--history.created_by="distribution/image/build.sh $arch" \
	--history.comment="Debian $suite packages (packages.txt), otelcol-ai $version, ONNX Runtime ${ORT_VERSION:-}, models" "$layer"
umoci config --no-history --image "$layout:$tag" \
	--created="$created" --author="otelcol-ai" --architecture="$arch" --os=linux \
	--config.entrypoint=/otelcol-ai/otelcol-ai --config.cmd=--config=embedded:default \
	--config.env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	--config.env=SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
	--config.user=0:0 \
	--config.exposedports=4317/tcp --config.exposedports=4318/tcp --config.exposedports=8888/tcp \
	--config.exposedports=8889/tcp --config.exposedports=13133/tcp \
	--config.label=org.opencontainers.image.title=otelcol-ai \
	--config.label=org.opencontainers.image.version="$version" \
	--config.label=org.opencontainers.image.licenses=Apache-2.0 \
	--config.label=org.opencontainers.image.source=https://github.com/otelcol-ai/otelcol-ai \
	--config.label=org.opencontainers.image.created="$created" \
	--manifest.annotation=org.opencontainers.image.version="$version" \
	--manifest.annotation=org.opencontainers.image.created="$created"
umoci gc --layout "$layout"
echo "build.sh: $layout:$tag ($(du -sh "$layer" | cut -f1) uncompressed)"
