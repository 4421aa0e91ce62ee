// Package deploy holds no code: its directory holds the deployment artifacts (deploy/compose.yaml,
// deploy/k8s/, deploy/dist/README.md; the Containerfile at the repository root) and its tests
// check them statically against the configuration loaders and the binaries' HTTP paths, since no
// container runtime or cluster is available where `make test` runs (docs/operations.md,
// "Deploying", says what was run end to end and what only checked this way).
package deploy
