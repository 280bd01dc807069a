package istiod

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/leader"
	"github.com/skiff-mesh/skiff/pkg/kuberest"
)

// Security is istiod's CA and TLS settings.
type Security struct {
	// Disabled turns the CA and the TLS listener off.
	Disabled bool
	// TrustDomain of issued identities (cluster.local).
	TrustDomain string
	// CADir keeps a generated self-signed root in file mode.
	CADir string
	// PluginCertsDir is the plug-in CA ("cacerts") directory.
	PluginCertsDir string
	// RootCertFile, when set, receives the root bundle (file mode's
	// equivalent of the istio-ca-root-cert ConfigMap).
	RootCertFile string
	// JWTPublicKeyFile and JWTIssuer configure the token verifier that needs
	// no API server (file mode): tokens shaped like Kubernetes projected ones.
	JWTPublicKeyFile string
	JWTIssuer        string
	// Namespace is istiod's namespace (istio-system).
	Namespace string
	// ServingDNSNames are the names in istiod's serving certificate.
	ServingDNSNames []string
	// Leader elects the replica that publishes the root certificate
	// ConfigMaps in Kubernetes mode (lease leader.NamespaceController). It
	// is not a flag: the caller sets it (see NewElector); nil publishes from
	// this replica as if it were the only one.
	Leader leader.Elector
}

func (s *Security) register(fs *pflag.FlagSet) {
	fs.BoolVar(&s.Disabled, "disable-ca", false, "run without the CA and the TLS listener")
	fs.StringVar(&s.TrustDomain, "trust-domain", "cluster.local", "trust domain of workload identities")
	fs.StringVar(&s.CADir, "ca-dir", "./var/lib/istio/ca", "file mode: where the self-signed root is generated and kept")
	fs.StringVar(&s.PluginCertsDir, "cacerts", "./etc/cacerts", "plug-in CA directory (ca-cert.pem, ca-key.pem, root-cert.pem, cert-chain.pem); used when it holds a key")
	fs.StringVar(&s.RootCertFile, "root-cert-file", "", "file mode: write the root bundle here")
	fs.StringVar(&s.JWTPublicKeyFile, "jwt-public-key", "", "file mode: PEM public key(s) that sign workload tokens")
	fs.StringVar(&s.JWTIssuer, "jwt-issuer", "https://kubernetes.default.svc.cluster.local", "file mode: the tokens' issuer")
	fs.StringVar(&s.Namespace, "namespace", cmp.Or(s.Namespace, "istio-system"), "istiod's namespace (default $POD_NAMESPACE)")
	fs.StringSliceVar(&s.ServingDNSNames, "serving-dns-names",
		[]string{"istiod.istio-system.svc", "istiod.istio-system.svc.cluster.local", "istiod", "localhost"},
		"comma list of DNS names in istiod's serving certificate")
}

// SecurityOptions builds the CA for cfg (Kubernetes mode when cfg names a
// cluster: TokenReview and the istio-ca-secret; else file mode: a JWT
// verifier and a root kept in CADir), registers CreateCertificate on every
// gRPC server, and serves TLS on secureAddr with a certificate from the CA.
func SecurityOptions(ctx context.Context, cfg Config, sec Security, secureAddr string, log *slog.Logger) ([]Option, *ca.CA, error) {
	if sec.Disabled {
		return nil, nil, nil
	}
	cc := ca.Config{TrustDomain: sec.TrustDomain, Namespace: sec.Namespace, RootCertPath: sec.RootCertFile, ServingDNSNames: sec.ServingDNSNames}
	if st, err := os.Stat(sec.PluginCertsDir); err == nil && st.IsDir() {
		cc.PluginCertsDir = sec.PluginCertsDir
	}
	if cfg.ConfigDir == "" {
		client, err := kubeClient(cfg)
		if err != nil {
			return nil, nil, err
		}
		cc.Client = client.Core
		// Published below, by the elected replica only.
		cc.DisableConfigMapPublishing = true
		cc.Authenticators = append(cc.Authenticators, ca.NewTokenReviewAuthenticator(client.Authentication, sec.TrustDomain))
	} else {
		cc.SelfSignedDir = sec.CADir
	}
	if sec.JWTPublicKeyFile != "" {
		pem, err := os.ReadFile(sec.JWTPublicKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--jwt-public-key: %w", err)
		}
		keys, err := ca.ParsePublicKeys(pem)
		if err != nil {
			return nil, nil, fmt.Errorf("--jwt-public-key %s: %w", sec.JWTPublicKeyFile, err)
		}
		a, err := ca.NewJWTAuthenticator(ca.JWTConfig{Issuer: sec.JWTIssuer, Keys: keys, TrustDomain: sec.TrustDomain})
		if err != nil {
			return nil, nil, err
		}
		cc.Authenticators = append(cc.Authenticators, a)
	}
	authority, err := ca.New(ctx, cc, log)
	if err != nil {
		return nil, nil, err
	}
	go func() {
		if err := authority.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("CA stopped", "err", err)
		}
	}()
	if cc.Client != nil {
		leader.Or(sec.Leader).Go(ctx, leader.NamespaceController, func(ctx context.Context) {
			if err := authority.PublishConfigMaps(ctx); err != nil && ctx.Err() == nil {
				log.Error("root certificate publisher stopped", "err", err)
			}
		})
	}
	opts := []Option{WithGRPC(authority.Register)}
	if secureAddr != "" {
		opts = append(opts, WithSecureGRPC(secureAddr, authority.ServerTLSConfig(), RequireIdentity(authority, log)))
	}
	return opts, authority, nil
}

func kubeClient(cfg Config) (*kuberest.Clients, error) {
	c, err := kubeClients(cfg)
	if err != nil {
		return nil, fmt.Errorf("the CA: %w", err)
	}
	return c, nil
}
