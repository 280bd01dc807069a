package cni

// Pod is the part of a core/v1 Pod the plugin reads, decoded straight from
// the API server's JSON.
type Pod struct {
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		UID         string            `json:"uid"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		InitContainers []Container `json:"initContainers"`
		Containers     []Container `json:"containers"`
	} `json:"spec"`
}

// Container is the part of a container the plugin reads.
type Container struct {
	Name            string           `json:"name"`
	Args            []string         `json:"args"`
	Env             []EnvVar         `json:"env"`
	SecurityContext *SecurityContext `json:"securityContext"`
}

// EnvVar is a container's literal environment variable.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// SecurityContext holds the ids a container runs as.
type SecurityContext struct {
	RunAsUser  *int64 `json:"runAsUser"`
	RunAsGroup *int64 `json:"runAsGroup"`
}
