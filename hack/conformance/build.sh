#!/usr/bin/env bash
# Builds what the Kubernetes conformance suite needs to run on a knest tenant that pulls
# nothing, offline (the Go module proxy and Debian packages), for one version:
#
#   bin/        e2e.test (`go test -c k8s.io/kubernetes/test/e2e`), ginkgo at the
#               version Kubernetes requires, go-runner (test/conformance/image), the
#               test images' own binaries (agnhost, nnp, sample-apiserver) and a link
#               to the node image's kubectl
#   images/<hash>/  conformance-images.tar (OCI archive): knest.local/conformance:<v>,
#               upstream's conformance image rebuilt (go-runner as its entrypoint), and
#               every test image of `e2e.test --list-images` knest can build, under
#               knest.local/e2e-test-images/ (repo-list.yaml maps the suite there)
#   nodes/<hash>/  the node image with those images baked in beside its own:
#               node-containerdisk.tar as knest/node-conformance:<v> (pools[].image);
#               the build needs about 10 GiB free for a while
#   node        symlink to the newest complete nodes/<hash>
#
# all under $KNEST_CACHE/conformance/<version>. Why a node image and not a registry on
# the host: docs/design/conformance-images.md.
#
# usage: KNEST_CACHE=... KUBE_VERSION=v1.35.4 hack/conformance/build.sh
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
version=${KUBE_VERSION:?KUBE_VERSION must be set (e.g. v1.35.4)}
node_out=${KNEST_CACHE:?KNEST_CACHE must be set}/node-image/out/$version
cache=$KNEST_CACHE/conformance/$version
GO=${GO:-go}
export GO
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${DEBIAN_SUITE:-bookworm}

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { echo "ERROR: $*" >&2; exit 1; }
hash_inputs() { # files or strings; by content, wherever the clone or cache is
	local a
	for a in "$@"; do
		if [ -d "$a" ]; then (cd "$a" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
		elif [ -f "$a" ]; then sha256sum <"$a"
		else echo "$a"; fi
	done | sha256sum | cut -c1-16
}
# step DIR FUNC: runs FUNC with $tmp as its output directory unless DIR is complete.
step() {
	[ -d "$1" ] && return 0
	tmp=$1.tmp
	rm -rf "$tmp" && mkdir -p "$tmp"
	"$2"
	mv "$tmp" "$1"
}
[ -f "$node_out/disk.raw" ] || die "$node_out/disk.raw missing: make node-image NODE_KUBE_VERSION=$version"
for tool in mmdebstrap debugfs resize2fs e2fsck qemu-img unshare ip curl; do
	command -v "$tool" >/dev/null || die "$tool not found (make node-image-tools installs it)"
done

# --- binaries --------------------------------------------------------------------------
bin=$cache/bin
log "conformance binaries of $version (e2e.test alone takes 10-20 minutes the first time)"
"$repo/images/scripts/build-kube.sh" "$version" "$cache/kube-mod" "$bin" e2e.test ginkgo go-runner agnhost nnp sample-apiserver
kubectl=$KNEST_CACHE/node-image/kube/$version/kubectl
kube_dir=$(cd "$cache/kube-mod" && $GO list -m -f '{{.Dir}}' k8s.io/kubernetes)
coredns=$(find "$KNEST_CACHE/node-image/bin" -path '*/coredns-*/coredns' | sort -V | tail -1)
[ -x "$kubectl" ] && [ -x "$coredns" ] || die "kubectl or coredns of the node image missing: make node-image NODE_KUBE_VERSION=$version"
# The suite runs kubectl of its own version (make e2e's smoke: --kubectl-path).
ln -sfn "$kubectl" "$bin/kubectl"
ociimage() { (cd "$repo/images/tools" && $GO run ./cmd/ociimage "$@"); }

# --- userlands (Debian packages) -------------------------------------------------------
# userland NAME PACKAGES [HOOK]: a Debian root filesystem tarball, cached by its inputs.
userland() {
	local dir pkgs=$2 hooks=(--customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin')
	[ -z "${3:-}" ] || hooks+=(--customize-hook="$3")
	dir=$cache/userland/$1-$(hash_inputs "$suite" "$2" "${3:-}")
	make_userland() {
		mmdebstrap --mode=root --variant=minbase --include="$pkgs" --aptopt='APT::Install-Recommends "false"' \
			--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
			--dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
			"${hooks[@]}" --skip=output/dev "$suite" "$tmp/rootfs.tar" "$mirror" >&2
	}
	log "userland $1: $2"
	step "$dir" make_userland
	echo "$dir/rootfs.tar"
}
# What agnhost's image has from Alpine (bind-tools curl netcat-openbsd iproute2 iperf
# bash, and busybox's applets where Debian has no command: netstat, wget, ping...,
# which specs run in it) and its users; the other images built on a shell share
# this layer.
# shellcheck disable=SC2016 # mmdebstrap expands $1
base=$(userland e2e bash,curl,bind9-dnsutils,netcat-openbsd,iproute2,iperf,procps,ca-certificates,busybox-static \
	'chroot "$1" busybox --install -s && chroot "$1" useradd -u 1000 -M user-defined-in-image && chroot "$1" groupadd -g 50000 group-defined-in-image && chroot "$1" usermod -aG group-defined-in-image user-defined-in-image && mkdir -p "$1/uploads"')
nginx_base=$(userland nginx nginx-light \
	'ln -sf /dev/stdout "$1/var/log/nginx/access.log" && ln -sf /dev/stderr "$1/var/log/nginx/error.log"')
# The busybox image's busybox: Debian's source package built with the configuration of
# its static flavour and FEATURE_DI_ENV_HACK, Debian's own switch (on in its installer's
# busybox-udeb) that keeps upstream's ash passing variables whose names are not
# identifiers on to commands (Debian reverts upstream's 9c143ce52 otherwise). Specs need
# both: `sh -c env` listing `data-1` and `1-data-1` (envFrom with prefixes), and ash's own
# words for a read-only root; bash's differ, and no Debian binary has both.
busybox_bin() {
	# shellcheck disable=SC2016 # expanded in the chroot
	local dir build='chroot "$1" sh -ec "
		apt-get update -q
		mkdir /src && cd /src && apt-get source -q --only-source busybox
		cd busybox-*/ && cp debian/config/pkg/static .config
		sed -i \"s/^# CONFIG_FEATURE_DI_ENV_HACK is not set/CONFIG_FEATURE_DI_ENV_HACK=y/\" .config
		grep -qx CONFIG_FEATURE_DI_ENV_HACK=y .config
		yes \"\" | make -s oldconfig >/dev/null
		make -s -j\$(nproc) busybox && install -m755 busybox /busybox"'
	dir=$cache/userland/busybox-$(hash_inputs "$suite" "$build")
	make_busybox() {
		mmdebstrap --mode=root --variant=minbase --include=build-essential,dpkg-dev \
			--aptopt='APT::Install-Recommends "false"' --customize-hook="$build" \
			--customize-hook="download /busybox $tmp/busybox" \
			"$suite" /dev/null "deb $mirror $suite main" "deb-src $mirror $suite main" >&2
	}
	log "busybox: Debian's source package with FEATURE_DI_ENV_HACK"
	step "$dir" make_busybox
	echo "$dir/busybox"
}
busybox=$(busybox_bin)
# The commands the suite runs in agnhost's image (its probes and execs), which
# upstream's Alpine has: a spec's probe failed for want of netstat.
commands=$(tar -tf "$base" | sed -n 's|^\./\(usr/\)\{0,1\}s\{0,1\}bin/||p')
for c in sh bash curl dig nslookup nc netstat wget ping ip iperf timeout; do
	grep -qx "$c" <<<"$commands" || die "the e2e userland has no $c"
done

# --- images ------------------------------------------------------------------------------
# Sorted: the suite lists them in a different order each time.
mapfile -t listed < <("$bin/e2e.test" --list-images 2>/dev/null | LC_ALL=C sort)
[ ${#listed[@]} -gt 0 ] || die "e2e.test --list-images listed nothing"
e2e_repo=registry.k8s.io/e2e-test-images
# registry.k8s.io's own images the suite lists (etcd, pause) the node image has under
# kubeadm's tags, but a suite may list another etcd (v1.34.4's 3.6.4-0 beside kubeadm's
# 3.6.5-0), which the sample API server's spec runs: built here at that version, where
# the node image builds its own. The rest the node image lacks (CSI sidecars of
# non-conformance specs, images invalid on purpose) are named with those not built.
in_node_image() { grep -qF "\"$1\"" "$node_out/manifest.json"; }
etcd_ref= etcd_bin=
for ref in "${listed[@]}"; do
	[[ $ref == registry.k8s.io/etcd:* ]] && ! in_node_image "$ref" || continue
	etcd_ref=$ref etcd_version=v${ref##*:}
	etcd_version=${etcd_version%-*} etcd_bin=$KNEST_CACHE/node-image/bin/etcd-$etcd_version/etcd
	log "etcd $etcd_version, which the suite lists and the node image has not"
	"$repo/images/scripts/build-gomod.sh" go.etcd.io/etcd/server/v3 "$etcd_version" go.etcd.io/etcd/server/v3 \
		"$KNEST_CACHE/node-image/mod/etcd-$etcd_version" "$etcd_bin"
done
# Apache's server alone, without Debian's configuration (httpd_layer): v1.34 lists httpd.
httpd_base=
[[ " ${listed[*]}" != *" $e2e_repo/httpd:"* ]] || httpd_base=$(userland httpd apache2-bin)
# A userland is named by the hash of its inputs: its directory's name stands for it.
images=$cache/images/$(hash_inputs "${listed[*]}" "$(basename "$(dirname "$base")")" "$(basename "$(dirname "$nginx_base")")" \
	"$(basename "$(dirname "$busybox")")" "${httpd_base:+$(basename "$(dirname "$httpd_base")")}" "$etcd_ref" "$bin" "$kubectl" "$coredns" "$0" "$repo/images/tools")
# httpd_layer DIR: $tmp/httpd.tar, what makes Debian's apache2 upstream's httpd image
# (the Docker library's): its paths (StatefulSet specs move htdocs/index.html away to
# fail the readiness probe, and back), httpd-foreground, logs to stdout and stderr.
# Checked by serving index.html from the image's root in a network namespace of its own.
httpd_layer() {
	local d=$1 a=/usr/local/apache2 m=/usr/lib/apache2/modules
	mkdir -p "$d$a/bin" "$d$a/conf" "$d$a/htdocs" "$d$a/logs"
	echo '<html><body><h1>It works!</h1></body></html>' >"$d$a/htdocs/index.html"
	echo 'text/html html htm' >"$d$a/conf/mime.types"
	cat >"$d$a/conf/httpd.conf" <<EOF
ServerRoot $a
ServerName localhost
Listen 80
LoadModule mpm_event_module $m/mod_mpm_event.so
LoadModule authz_core_module $m/mod_authz_core.so
LoadModule dir_module $m/mod_dir.so
LoadModule mime_module $m/mod_mime.so
User www-data
Group www-data
PidFile logs/httpd.pid
DefaultRuntimeDir logs
ErrorLog /proc/self/fd/2
LogFormat "%h %l %u %t \"%r\" %>s %b" common
CustomLog /proc/self/fd/1 common
TypesConfig conf/mime.types
DocumentRoot $a/htdocs
DirectoryIndex index.html
<Directory $a/htdocs>
	Require all granted
</Directory>
EOF
	printf '%s\n' '#!/bin/sh' "exec /usr/sbin/apache2 -d $a -f conf/httpd.conf \"\$@\"" >"$d$a/bin/httpd"
	printf '%s\n' '#!/bin/sh' 'set -e' "rm -f $a/logs/httpd.pid" 'exec httpd -DFOREGROUND "$@"' >"$d$a/bin/httpd-foreground"
	chmod 0755 "$d$a/bin/httpd" "$d$a/bin/httpd-foreground"
	tar --numeric-owner --owner=0 --group=0 -C "$d" -cf "$tmp/httpd.tar" .
	local root=$d.check c
	mkdir -p "$root" && tar -xf "$httpd_base" -C "$root" && tar -xf "$tmp/httpd.tar" -C "$root"
	for c in sh hostname printf dd ln ls find touch mv cat; do
		chroot "$root" sh -c "command -v $c" >/dev/null || die "the httpd image has no $c"
	done
	# shellcheck disable=SC2016 # expanded in the namespaces (a container's: /proc, its lo)
	unshare --net --mount --pid --fork --mount-proc="$root/proc" sh -c 'ip link set lo up
		PATH=/usr/local/apache2/bin:$PATH chroot "$1" httpd-foreground >"$1.log" 2>&1 & pid=$!
		for i in $(seq 50); do curl -sf http://127.0.0.1/index.html >/dev/null && break; sleep 0.2; done
		curl -sf http://127.0.0.1/index.html && chroot "$1" mv /usr/local/apache2/htdocs/index.html /tmp/ &&
		! curl -sf http://127.0.0.1/index.html >/dev/null && echo moved; kill $pid; wait' sh "$root" >"$tmp/httpd-check" 2>&1 || true
	grep -q 'It works' "$tmp/httpd-check" && grep -qx moved "$tmp/httpd-check" ||
		die "the httpd image does not serve index.html as upstream's: $(cat "$tmp/httpd-check" "$root.log")"
	rm -rf "$root" "$root.log" "$tmp/httpd-check"
}
build_images() {
	local t=$tmp/trees
	mkdir -p "$t/busybox/bin" "$t/conformance/tmp" "$t/conformance/kubernetes" "$t/conformance/usr/local/bin"
	# busybox as upstream's image: every applet a link in /bin.
	install -m755 "$busybox" "$t/busybox/bin/busybox"
	local a
	for a in $("$t/busybox/bin/busybox" --list); do [ -e "$t/busybox/bin/$a" ] || ln -s busybox "$t/busybox/bin/$a"; done
	# Its root as upstream's: specs write to /tmp (a probe's file), and run as nobody.
	mkdir -p "$t/busybox/etc" "$t/busybox/root" "$t/busybox/home" "$t/busybox/var" "$t/busybox/tmp"
	chmod 1777 "$t/busybox/tmp"
	printf '%s\n' root:x:0:0:root:/root:/bin/sh nobody:x:65534:65534:nobody:/home:/bin/false >"$t/busybox/etc/passwd"
	printf '%s\n' root:x:0: nobody:x:65534: >"$t/busybox/etc/group"
	# What specs do in it, in it (busybox is static): list variables named `data-1`,
	# write a probe's file to /tmp, and fail to write to a read-only root in ash's words.
	chroot "$t/busybox" /bin/env -i 'data-1=ok' /bin/sh -c 'env; echo ok >/tmp/health && cat /tmp/health && rm /tmp/health' >"$tmp/busybox-check" 2>&1 || true
	grep -qx 'data-1=ok' "$tmp/busybox-check" || die "the busybox image's sh drops variables whose names are not identifiers: $(cat "$tmp/busybox-check")"
	grep -qx ok "$tmp/busybox-check" || die "the busybox image cannot write to /tmp: $(cat "$tmp/busybox-check")"
	# shellcheck disable=SC2016 # expanded by the sh in the namespace
	unshare --mount sh -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && chroot "$1" /bin/sh -c "echo test > /file"' sh "$t/busybox" 2>"$tmp/busybox-check" || true
	[ "$(cat "$tmp/busybox-check")" = "/bin/sh: can't create /file: Read-only file system" ] ||
		die "the busybox image's sh does not fail on a read-only root as upstream's: $(cat "$tmp/busybox-check")"
	tar --numeric-owner --owner=0 --group=0 -C "$t/busybox" -cf "$tmp/busybox.tar" .
	[ -z "$httpd_base" ] || httpd_layer "$t/httpd"
	# The conformance image (test/conformance/image/Dockerfile): the suite, ginkgo,
	# kubectl and go-runner as its entrypoint, /tmp writable by the suite's uid.
	cp "$bin/e2e.test" "$bin/ginkgo" "$kubectl" "$t/conformance/usr/local/bin/"
	cp "$bin/go-runner" "$t/conformance/usr/local/bin/kubeconformance"
	chmod 1777 "$t/conformance/tmp"
	tar --numeric-owner --owner=0 --group=0 -C "$t/conformance" -cf "$tmp/conformance.tar" .
	local agnhost_layers kitten=$kube_dir/test/images/kitten/html nautilus=$kube_dir/test/images/nautilus/html
	# /agnhost-2, a link upstream's Dockerfile makes: specs override the entrypoint with it.
	ln -s agnhost "$t/agnhost-2"
	agnhost_layers='{"tarball": "'$base'"}, {"files": [{"src": "'$bin/agnhost'", "dst": "/agnhost", "mode": "0755"}, {"src": "'$t/agnhost-2'", "dst": "/agnhost-2"}, {"src": "'$coredns'", "dst": "/coredns", "mode": "0755"}, {"src": "'$kube_dir/test/images/agnhost/porter/localhost.crt'", "dst": "/localhost.crt", "mode": "0644"}, {"src": "'$kube_dir/test/images/agnhost/porter/localhost.key'", "dst": "/localhost.key", "mode": "0644"}]}'
	local ref name tag path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin spec=() refs=("knest.local/conformance:$version") skipped=()
	spec+=("{\"ref\": \"knest.local/conformance:$version\", \"layers\": [{\"tarball\": \"$tmp/busybox.tar\"}, {\"tarball\": \"$tmp/conformance.tar\"}], \"entrypoint\": [\"/usr/local/bin/kubeconformance\"], \"env\": [\"PATH=/usr/local/bin:/bin\", \"HOME=/tmp\", \"E2E_FOCUS=\\\\[Conformance\\\\]\", \"E2E_SKIP=\", \"E2E_PROVIDER=local\", \"E2E_PARALLEL=1\", \"E2E_VERBOSITY=4\", \"RESULTS_DIR=/tmp/results\", \"KUBECONFIG=\"]}")
	for ref in "${listed[@]}"; do
		if [ "$ref" = "$etcd_ref" ]; then
			spec+=("{\"ref\": \"$ref\", \"layers\": [{\"files\": [{\"src\": \"$etcd_bin\", \"dst\": \"/usr/local/bin/etcd\", \"mode\": \"0755\"}]}]}")
			refs+=("$ref")
			continue
		fi
		if [[ $ref != "$e2e_repo"/* ]]; then
			in_node_image "$ref" || skipped+=("$ref")
			continue
		fi
		name=${ref#"$e2e_repo"/} tag=${name##*:} name=${name%:*}
		local out="knest.local/e2e-test-images/$name:$tag" s= env="\"PATH=$path\""
		case $name in
		agnhost) s="\"layers\": [$agnhost_layers], \"entrypoint\": [\"/agnhost\"], \"cmd\": [\"pause\"]" ;;
		kitten | nautilus)
			local html=$kitten
			[ "$name" = kitten ] || html=$nautilus
			s="\"layers\": [$agnhost_layers, {\"files\": [{\"src\": \"$html/$name.jpg\", \"dst\": \"/$name.jpg\", \"mode\": \"0644\"}, {\"src\": \"$html/data.json\", \"dst\": \"/data.json\", \"mode\": \"0644\"}]}], \"entrypoint\": [\"/agnhost\"], \"cmd\": [\"test-webserver\"]" ;;
		busybox) s="\"layers\": [{\"tarball\": \"$tmp/busybox.tar\"}], \"cmd\": [\"sh\"]" ;;
		httpd) # two tags, one server: HTTPD_VERSION tells them apart, as upstream's do
			s="\"layers\": [{\"tarball\": \"$httpd_base\"}, {\"tarball\": \"$tmp/httpd.tar\"}], \"workingDir\": \"/usr/local/apache2\", \"cmd\": [\"httpd-foreground\"]"
			env="\"PATH=/usr/local/apache2/bin:$path\", \"HTTPD_VERSION=${tag%-*}\"" ;;
		jessie-dnsutils) s="\"layers\": [{\"tarball\": \"$base\"}, {\"files\": [{\"src\": \"$coredns\", \"dst\": \"/coredns\", \"mode\": \"0755\"}]}], \"cmd\": [\"/bin/bash\"]" ;;
		nginx) s="\"layers\": [{\"tarball\": \"$nginx_base\"}], \"cmd\": [\"nginx\", \"-g\", \"daemon off;\"]" ;;
		nonroot) s="\"layers\": [{\"tarball\": \"$base\"}], \"user\": \"1234\", \"cmd\": [\"/bin/bash\"]" ;;
		nonewprivs) s="\"layers\": [{\"tarball\": \"$base\"}, {\"files\": [{\"src\": \"$bin/nnp\", \"dst\": \"/usr/local/bin/nnp\", \"mode\": \"4755\"}]}], \"cmd\": [\"nnp\"]" ;;
		sample-apiserver) s="\"layers\": [{\"tarball\": \"$base\"}, {\"files\": [{\"src\": \"$bin/sample-apiserver\", \"dst\": \"/sample-apiserver\", \"mode\": \"0755\"}]}], \"entrypoint\": [\"/sample-apiserver\"]" ;;
		*) skipped+=("$ref"); continue ;;
		esac
		spec+=("{\"ref\": \"$out\", $s, \"env\": [$env]}")
		refs+=("$out")
	done
	{ echo '{"images": ['; (IFS=,; echo "${spec[*]}"); echo ']}'; } >"$tmp/spec.json"
	log "writing the conformance images archive (${#refs[@]} images)"
	ociimage containers -spec "$tmp/spec.json" -out "$tmp/conformance-images.tar"
	printf '%s\n' "${refs[@]}" >"$tmp/refs.txt"
	printf '%s\n' "${skipped[@]}" >"$tmp/not-built.txt"
	# KUBE_TEST_REPO_LIST (hydrophone --test-repo-list): only the e2e images move.
	echo "promoterE2eRegistry: knest.local/e2e-test-images" >"$tmp/repo-list.yaml"
	rm -rf "$tmp/trees" "$tmp/busybox.tar" "$tmp/busybox-check" "$tmp/conformance.tar" "$tmp/httpd.tar"
}
step "$images" build_images
for d in "$cache"/images/*; do [ "$d" = "$images" ] || rm -rf "$d"; done
log "test images not built (tests that use them fail): $(paste -sd' ' "$images/not-built.txt")"

# --- node image with the images baked in -------------------------------------------------
# The finished node image's disk, grown, with the archive where the boot-time import
# looks and the import stamp removed, booted once more by bake.sh, which imports it and
# checks every reference of the manifest (the node's own and these).
# (Directory names, not contents: each is named by the hash of what made it.)
node_dir=$cache/nodes/$(hash_inputs "$(basename "$(readlink -f "$node_out")")" "$(basename "$images")" "$repo/images/scripts/bake.sh" "$0")
build_node() {
	local raw=$tmp/in.raw
	cp --sparse=always "$node_out/disk.raw" "$raw"
	truncate -s +$(($(stat -c %s "$images/conformance-images.tar") * 3 + (1 << 30))) "$raw"
	e2fsck -fy "$raw" >/dev/null || true
	resize2fs "$raw" >&2
	# One reference a line right after "images": [, as build.sh writes them (the bake
	# checks every line that is a bare quoted string).
	sed 's/.*/    "&",/' "$images/refs.txt" >"$tmp/refs.lines"
	sed '/^  "images": \[$/r '"$tmp/refs.lines" "$node_out/manifest.json" >"$tmp/manifest.json"
	grep -qF "\"knest.local/conformance:$version\"," "$tmp/manifest.json" || die "cannot add the images to manifest.json"
	debugfs -w -f - "$raw" >/dev/null <<EOF
cd /var/lib/knest/images
write $images/conformance-images.tar conformance-images.tar
rm /var/lib/knest/images-imported
rm /etc/knest/manifest.json
cd /etc/knest
write $tmp/manifest.json manifest.json
EOF
	local args
	args=$(jq -r .kernelArgs "$node_out/manifest.json")
	"$repo/images/scripts/bake.sh" "$raw" "$node_out/vmlinuz" "$node_out/initrd.img" "$args" "$tmp"
	rm "$raw" "$tmp/refs.lines"
	cp "$node_out/vmlinuz" "$node_out/initrd.img" "$tmp/"
	qemu-img convert -c -O qcow2 "$tmp/disk.raw" "$tmp/disk.qcow2"
	rm "$tmp/disk.raw"
	ociimage containerdisk -ref "knest/node-conformance:$version" -disk "$tmp/disk.qcow2" -out "$tmp/node-containerdisk.tar"
	rm "$tmp/disk.qcow2"
}
log "node image with the conformance images: $node_dir"
step "$node_dir" build_node
ln -sfn "$node_dir" "$cache/node.tmp" && mv -T "$cache/node.tmp" "$cache/node"
for d in "$cache"/nodes/*; do [ "$d" = "$node_dir" ] || rm -rf "$d"; done
log "conformance $version: $cache (node image $cache/node/node-containerdisk.tar as knest/node-conformance:$version)"
