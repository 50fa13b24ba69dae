# shellcheck shell=bash
# Owns the Kubernetes binaries: fetches Debian's full kubernetes 1.20.2 source package,
# swaps the two vendored libraries that break on Go >= 1.18, builds the control plane,
# node binaries and kubectl with the tree's own Makefile, and caches them by version.

K8S_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

binaries_cached() {
  [ -f "$BIN_DIR/.complete" ]
}

ensure_deb_src() {
  local f=/etc/apt/sources.list.d/otus-debian-src.sources
  if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ /etc/apt/sources.list; then
    say "adding a deb-src entry for Debian main ($f)"
    cat > "$f" <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt-get update -qq
  fi
}

# The vendored OpenAPI validators treat a value as "null" when
# reflect.DeepEqual(reflect.Zero(T), reflect.ValueOf(v)) holds. Since Go 1.18 that is
# true for every zero value, so built with Debian's Go 1.19 the API server rejects an
# empty string in a custom resource ("spec.s in body must be of type string: null").
# Later kube-openapi checks `data == nil` only; do the same.
patch_openapi_validation() {
  local tree=$1 f
  for f in vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go vendor/github.com/go-openapi/validate/type.go; do
    sed -i 's/if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {/if data == nil {/' "$tree/$f"
    grep -q 'if data == nil {' "$tree/$f" || die "could not patch $f"
  done
}

build_binaries() {
  if binaries_cached; then say "cached: Kubernetes $K8S_VERSION binaries in $BIN_DIR"; return 0; fi
  ensure_deb_src
  mkdir -p "$SRC_DIR"
  local orig
  orig=$(find "$SRC_DIR" -maxdepth 1 -name "kubernetes_*really${K8S_VERSION}.orig.tar.gz" | head -1)
  if [ -z "$orig" ]; then
    say "downloading Debian's kubernetes source package (34 MB)"
    (cd "$SRC_DIR" && apt-get source --download-only kubernetes >/dev/null 2>&1) || die "apt-get source kubernetes failed"
    orig=$(find "$SRC_DIR" -maxdepth 1 -name "kubernetes_*really${K8S_VERSION}.orig.tar.gz" | head -1)
    [ -n "$orig" ] || die "Debian's kubernetes source is not version $K8S_VERSION (the only full tree)"
  fi
  local tree="$SRC_DIR/tree/kubernetes-$K8S_VERSION"
  if [ ! -f "$tree/.patched-r$BUILD_REV" ]; then
    say "unpacking $orig"
    rm -rf "$SRC_DIR/tree" && mkdir -p "$SRC_DIR/tree"
    tar -xzf "$orig" -C "$SRC_DIR/tree"
    local p
    for p in github.com/modern-go/reflect2 github.com/json-iterator/go; do
      [ -d "/usr/share/gocode/src/$p" ] || die "missing /usr/share/gocode/src/$p"
      rm -rf "${tree:?}/vendor/$p"
      cp -r "/usr/share/gocode/src/$p" "$tree/vendor/$p"
      find "$tree/vendor/$p" -name '*_test.go' -delete
    done
    patch_openapi_validation "$tree"
    touch "$tree/.patched-r$BUILD_REV"
  fi
  say "building Kubernetes $K8S_VERSION (${K8S_BINARIES[*]}); first time only, about 8-10 minutes on 2 cores"
  local what="" b
  for b in "${K8S_BINARIES[@]}"; do what="$what cmd/$b"; done
  (
    cd "$tree"
    make WHAT="${what# }" > "$SRC_DIR/build.log" 2>&1 &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      sleep 30
      say "  still building ($(tail -1 "$SRC_DIR/build.log" | tr -s ' '))"
    done
    wait "$pid"
  ) || { tail -30 "$SRC_DIR/build.log" >&2; die "Kubernetes build failed (log: $SRC_DIR/build.log)"; }
  local tmp="$BIN_DIR.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  for b in "${K8S_BINARIES[@]}"; do cp "$tree/_output/bin/$b" "$tmp/$b"; done
  touch "$tmp/.complete"
  rm -rf "$BIN_DIR" && mv "$tmp" "$BIN_DIR"
  say "cached Kubernetes binaries in $BIN_DIR"
}
