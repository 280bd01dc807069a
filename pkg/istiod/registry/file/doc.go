// Package file is istiod's registry for a directory of YAML files
// (`istiod --config-dir`): Services, EndpointSlices, Pods and Istio
// configuration, watched with fsnotify. A file that does not parse or
// validate is reported with its path, object and reason and skipped; the
// rest of the configuration stays in force.
package file
