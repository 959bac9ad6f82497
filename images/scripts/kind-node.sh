# Step 8 of images/build.sh (sourced; uses its variables and helpers): the host node
# of `make e2e`, a root filesystem tarball with the same base, Kubernetes binaries
# and preloaded images as a tenant node, plus kind's node files from the kind module
# and kube-router's NetworkPolicy controller. See images/kind/README.md.
kind_tools=$repo/hack/tools/kind
kind_mod=$(cd "$kind_tools/kind" && $GO list -m -f '{{.Dir}}' sigs.k8s.io/kind)
kuberouter_ref=knest.local/kube-router:$(cd "$kind_tools/kuberouter" && $GO list -m -f '{{.Version}}' github.com/cloudnativelabs/kube-router/v2)
kind_hash=$(hash_inputs "$base_hash" "$images_hash" "$version" "$here/kind" "$here/rootfs/overlay" \
	"$here/rootfs/templates" "$kind_tools/kind/go.mod" "$kind_tools/kuberouter/go.sum" "$here/scripts/kind-node.sh" \
	"$kube/kubelet" "$kube/kubeadm" "$kube/kubectl" "$containerd_bin" "$runc_bin")
kind_out=$cache/kind/$version-$kind_hash
build_kind() {
	local root=$tmp/rootfs files=$kind_mod/images/base/files
	mkdir -p "$root"
	log "building kube-router ($kuberouter_ref) and its userland (iptables, ipset)"
	(cd "$kind_tools/kuberouter" && CGO_ENABLED=0 $GO build -trimpath -ldflags '-s -w' -o "$tmp/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router)
	mmdebstrap --mode=root --variant=minbase --include=iptables,ipset --aptopt='APT::Install-Recommends "false"' \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
		--customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' --skip=output/dev \
		"${DEBIAN_SUITE:-bookworm}" "$tmp/kube-router-userland.tar" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
	cat >"$tmp/kube-router.json" <<JSON
{"images": [{"ref": "$kuberouter_ref", "layers": [{"tarball": "$tmp/kube-router-userland.tar"},
 {"files": [{"src": "$tmp/kube-router", "dst": "/usr/local/bin/kube-router", "mode": "0755"}]}], "entrypoint": ["/usr/local/bin/kube-router"]}]}
JSON
	"$tools/ociimage" containers -spec "$tmp/kube-router.json" -out "$tmp/kube-router.tar"
	rm "$tmp/kube-router-userland.tar" "$tmp/kube-router"

	log "assembling the kind node root filesystem"
	tar --xattrs --xattrs-include='*' --numeric-owner -xpf "$base/rootfs.tar" -C "$root"
	# What kind's base image does: nothing starts but what a node needs (no ssh,
	# cloud-init, networkd: the container engine owns the network).
	rm -f "$root"/lib/systemd/system/multi-user.target.wants/* "$root"/etc/systemd/system/*.wants/* \
		"$root"/lib/systemd/system/local-fs.target.wants/* "$root"/lib/systemd/system/sockets.target.wants/*udev* \
		"$root"/lib/systemd/system/sockets.target.wants/*initctl* "$root"/lib/systemd/system/basic.target.wants/*
	find "$root/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
	touch "$root/etc/cloud/cloud-init.disabled"
	echo "ReadKMsg=no" >>"$root/etc/systemd/journald.conf"
	# The tenant node's image import, then kind's node files (their kubelet unit and
	# drop-ins replace the tenant ones), then knest's kind overlay.
	install -D -m 0755 "$here/rootfs/overlay/usr/lib/knest/import-images" "$root/usr/lib/knest/import-images"
	install -m 0644 "$here/rootfs/overlay/etc/systemd/system/knest-preload-images.service" \
		"$here/rootfs/overlay/etc/systemd/system/containerd.service" "$root/etc/systemd/system/"
	install -m 0644 "$here/rootfs/overlay/etc/sysctl.d/90-kubernetes.conf" "$root/etc/sysctl.d/"
	install -m 0755 "$files"/usr/local/bin/* "$root/usr/local/bin/"
	mkdir -p "$root/kind/bin" "$root/kind/manifests" "$root/etc/systemd/system/kubelet.service.d" "$root/etc/kubernetes/manifests"
	install -m 0755 "$files"/kind/bin/* "$root/kind/bin/"
	install -m 0644 "$files"/etc/sysctl.d/* "$root/etc/sysctl.d/"
	install -m 0644 "$files"/etc/default/kubelet "$root/etc/default/"
	install -m 0644 "$files"/etc/crictl.yaml "$root/etc/"
	install -m 0644 "$files"/etc/systemd/system/kubelet.service "$files"/etc/systemd/system/kubelet.slice \
		"$files"/etc/systemd/system/undo-mount-hacks.service "$root/etc/systemd/system/"
	install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/* "$root/etc/systemd/system/kubelet.service.d/"
	cp -a "$here/kind/overlay/." "$root/"
	systemctl --root="$root" --quiet enable containerd kubelet undo-mount-hacks knest-preload-images
	systemctl --root="$root" --quiet mask systemd-binfmt.service
	ln -sf /usr/lib/systemd/systemd "$root/sbin/init"
	install -m 0755 "$kube/kubelet" "$kube/kubeadm" "$kube/kubectl" "$root/usr/bin/"
	# The tenant node's containerd and runc (build.sh, install_runtime) with its
	# configuration, not kind's own config.toml: kind's refers to files of kind's base
	# image (cri-base.json, the fuse-overlayfs proxy plugin) that this node has not.
	install_runtime "$root"
	# A container on these hosts has no CAP_SYS_RESOURCE, so runc cannot lower a pod's
	# oom_score_adj below its own (sandboxes fail "can't get final child's PID from
	# pipe"); containerd then clamps it, as kind does for rootless nodes.
	sed -e "s#@PAUSE_IMAGE@#$pause_ref#" -e 's#^\(\s*restrict_oom_score_adj\) = false#\1 = true#' \
		"$here/rootfs/templates/containerd-config.toml" >"$root/etc/containerd/config.toml"
	grep -q 'restrict_oom_score_adj = true' "$root/etc/containerd/config.toml" || die "containerd config: cannot set restrict_oom_score_adj"
	mkdir -p "$root/opt/cni/bin" "$root/var/lib/knest/images"
	local p
	for p in "$root"/usr/lib/cni/*; do ln -sf "/usr/lib/cni/$(basename "$p")" "$root/opt/cni/bin/"; done
	cp "$images/images.tar" "$tmp/kube-router.tar" "$root/var/lib/knest/images/"
	echo "$version" >"$root/kind/version"
	# kind applies this after kubeadm init; pod networking itself is the static ptp config.
	sed "s#@IMAGE@#$kuberouter_ref#" "$here/kind/kube-router.yaml" >"$root/kind/manifests/default-cni.yaml"
	log "writing the kind node root filesystem tarball"
	tar --xattrs --xattrs-include='*' --numeric-owner -C "$root" -cf "$tmp/kind-node.tar" .
	rm -rf "$root"
}
step "$kind_out" build_kind
ln -sfn "$(basename "$kind_out")" "$cache/kind/$version.tmp"
mv -T "$cache/kind/$version.tmp" "$cache/kind/$version"
prune_older "$kind_out"
log "kind node $version: $cache/kind/$version/kind-node.tar"
