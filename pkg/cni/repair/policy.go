package repair

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Broken reports whether pod started without capture: it carries the
// sidecar annotation and its validation init container failed as the
// settings describe. Like Istio, it looks at the container's last
// termination (a crash loop: waiting to restart after the failure) and
// never at one whose current run succeeded; unlike Istio it also looks at
// the current termination, which is the only one a pod that is not
// restarted (restartPolicy Never) ever shows.
func (c Config) Broken(pod *corev1.Pod) bool {
	if c.SidecarAnnotation != "" {
		if _, ok := pod.Annotations[c.SidecarAnnotation]; !ok {
			return false
		}
	}
	for _, s := range pod.Status.InitContainerStatuses {
		if c.InitContainerName != "" && s.Name != c.InitContainerName {
			continue
		}
		if t := s.State.Terminated; t != nil {
			if t.ExitCode == 0 || t.Reason == "Completed" {
				continue // it passed: never broken
			}
			if c.matches(t) {
				return true
			}
		}
		if t := s.LastTerminationState.Terminated; t != nil && c.matches(t) {
			return true
		}
	}
	return false
}

// matches is the exit code and termination message filter.
func (c Config) matches(t *corev1.ContainerStateTerminated) bool {
	if c.InitExitCode != 0 && t.ExitCode != c.InitExitCode {
		return false
	}
	msg := strings.TrimSpace(c.InitTerminationMsg)
	return msg == "" || msg == strings.TrimSpace(t.Message)
}
