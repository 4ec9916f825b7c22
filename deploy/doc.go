// Package deploy holds no code: its tests check the deployment files beside
// them, since no Kubernetes cluster or Docker engine is at hand to try them on.
//
//   - every .yaml, .yml and .json file parses (every document of it), but
//     the Helm chart's templates, which are rendered instead;
//   - the Kubernetes manifests are complete objects whose selectors, ports
//     and probes agree, and both kustomize overlays build (in process, with
//     sigs.k8s.io/kustomize/api) into what they promise;
//   - the minimum Kubernetes version is stated alike in the README, the
//     overlays and the chart (its kubeVersion too), and is at least that of
//     every feature they use;
//   - every coordd container with a memory limit sets GOMEMLIMIT from it;
//   - the shared overlay's NetworkPolicy, as rendered, admits to the gRPC
//     port only pods labelled coordd-client: "true", and to the metrics port
//     only the namespace monitoring;
//   - the Helm chart helm/coordd renders with Helm's own engine
//     (helm.sh/helm/v3: chart loader, values schema, engine) in both modes
//     (shared, sidecar) for its defaults and each values file of its ci/
//     folder, passes Helm's linter, refuses values that would put a secret
//     in its ConfigMap, and its coordd container is the overlays';
//   - the overlays and the chart's renders pass one set of rules
//     (rules_test.go: probes, limits, securityContext, grace period,
//     GOMEMLIMIT, NetworkPolicy, Kubernetes features), which a rendering
//     without one of coordd's probes fails (TestRulesCatchADroppedProbe);
//   - compose/compose.yaml has its Redis Cluster, init job, coordd replicas,
//     Prometheus and Grafana, wired to services and files that exist;
//   - the Prometheus alert rules pass Prometheus's own rule validation
//     (PromQL and templates), and every panel of the Grafana dashboard has
//     queries that parse;
//   - the Dockerfile has its build and distroless stages, USER and
//     HEALTHCHECK;
//   - coordd itself (built from ../cmd/coordd) starts with the configuration
//     of each overlay, each of the chart's renders (with the files of the
//     Secrets they mount) and the compose services, and answers its health
//     check.
//
// It is a module of its own, so that kustomize, Helm and Prometheus stay out
// of the daemon's go.mod:
//
//	cd deploy && go test ./...
package deploy
