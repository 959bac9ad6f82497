package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Object names derive from the NestedCluster name (at most 30 characters) and pool
// names (at most 15), so that Machine and VM names Cluster API derives from them
// (<deployment>-<5>-<5>) stay within the 63 characters of a host name.

// ControlPlaneName is the KubeadmControlPlane's name.
func ControlPlaneName(cluster string) string { return cluster + "-cp" }

// PoolName is a worker pool's MachineDeployment and MachineHealthCheck name.
func PoolName(cluster, pool string) string { return cluster + "-" + pool }

// CNIName is the ClusterResourceSet and ConfigMap carrying the tenant CNI.
func CNIName(cluster string) string { return cluster + "-cni" }

// KubeconfigSecretName is the Secret Cluster API writes the admin kubeconfig to.
func KubeconfigSecretName(cluster string) string { return cluster + "-kubeconfig" }

// hashedName appends a short content hash, so an immutable template whose content
// changes gets a new name and the change rolls out as a rolling update.
func hashedName(base string, content any) (string, error) {
	h, err := ContentHash(content)
	if err != nil {
		return "", err
	}
	return base + "-" + h[:8], nil
}

// ContentHash is the hex SHA-256 of content's JSON encoding (map keys are sorted by
// encoding/json, so it is stable).
func ContentHash(content any) (string, error) {
	raw, err := json.Marshal(content)
	if err != nil {
		return "", fmt.Errorf("failed to hash: %w", err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}
