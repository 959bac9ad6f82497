# The knest controller image for a host cluster with Docker (hack/kind/up.sh builds the
# same image, /knest as uid 65532, without an engine):
#   docker build --build-arg GO_VERSION=$(awk '$1 == "go" {print $2}' go.mod) -t knest:dev .
# config/manager runs it as `/knest controller --leader-elect ...`.
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
# go.mod may ask for a newer patch release than the image has.
ENV CGO_ENABLED=0 GOTOOLCHAIN=auto GOCACHE=/cache/go-build
WORKDIR /src
COPY go.mod go.sum ./
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/cache/go-build \
    go build -trimpath -ldflags '-s -w' -o /out/knest ./cmd/knest

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/knest /knest
# Numeric, so the Deployment's runAsNonRoot can verify it.
USER 65532:65532
ENTRYPOINT ["/knest"]
