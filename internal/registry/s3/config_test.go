package s3

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	home := t.TempDir()
	credFile := filepath.Join(home, "creds")
	if err := os.WriteFile(credFile, []byte("[default]\naws_access_key_id = k\naws_secret_access_key = s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, url, flag string
		env             map[string]string
		want            Config // fields compared when set
		creds           string // Credentials.Source prefix
		wantErr         string // substring
	}{
		{name: "flag endpoint, env keys", url: "s3://models/prod/sluice", flag: "http://127.0.0.1:8333",
			env:   map[string]string{"AWS_ACCESS_KEY_ID": "AKIA1", "AWS_SECRET_ACCESS_KEY": "s3cr3t", "AWS_SESSION_TOKEN": "tok", "AWS_ENDPOINT_URL": "http://ignored:1"},
			want:  Config{URL: "s3://models/prod/sluice", Bucket: "models", Prefix: "prod/sluice", Endpoint: "http://127.0.0.1:8333", EndpointFrom: "--s3-endpoint", Region: "us-east-1"},
			creds: "environment"},
		{name: "service-specific endpoint first", url: "s3://models", env: map[string]string{"AWS_ENDPOINT_URL_S3": "https://s3.example.com/", "AWS_ENDPOINT_URL": "http://other:1", "AWS_REGION": "eu-west-3", "AWS_DEFAULT_REGION": "ap-south-1"},
			want: Config{URL: "s3://models", Bucket: "models", Endpoint: "https://s3.example.com", EndpointFrom: "AWS_ENDPOINT_URL_S3", Region: "eu-west-3"}, creds: "none"},
		{name: "generic endpoint, default region var", url: "s3://models/", env: map[string]string{"AWS_ENDPOINT_URL": "http://10.0.0.1:9000", "AWS_DEFAULT_REGION": "ap-south-1"},
			want: Config{URL: "s3://models", Endpoint: "http://10.0.0.1:9000", EndpointFrom: "AWS_ENDPOINT_URL", Region: "ap-south-1"}},
		{name: "amazon by default", url: "s3://models/a", want: Config{Endpoint: "https://s3.amazonaws.com", Prefix: "a"}},
		{name: "shared credentials file", url: "s3://models", env: map[string]string{"AWS_SHARED_CREDENTIALS_FILE": credFile, "AWS_PROFILE": "ci"}, creds: "shared credentials file " + credFile + " (profile ci)"},
		{name: "web identity", url: "s3://models", env: map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token"}, creds: "web identity"},
		{name: "not s3", url: "gs://models", wantErr: `--artifacts "gs://models": use s3://BUCKET/PREFIX`},
		{name: "no bucket", url: "s3:///x", wantErr: "use s3://BUCKET/PREFIX"},
		{name: "a path", url: "/srv/artifacts", wantErr: "use s3://BUCKET/PREFIX"},
		{name: "bad bucket", url: "s3://Models_X", wantErr: `bucket "Models_X"`},
		{name: "dot-dot prefix", url: "s3://models/a/../b", wantErr: "empty, . or .. segment"},
		{name: "query", url: "s3://models/a?region=x", wantErr: "use s3://BUCKET/PREFIX"},
		{name: "endpoint without scheme", url: "s3://models", flag: "127.0.0.1:8333", wantErr: `--s3-endpoint "127.0.0.1:8333": use a URL like http://127.0.0.1:8333`},
		{name: "endpoint with a path", url: "s3://models", flag: "http://127.0.0.1:8333/models", wantErr: "scheme and host only"},
		{name: "endpoint with credentials", url: "s3://models", env: map[string]string{"AWS_ENDPOINT_URL": "http://AKIA:hunter2@127.0.0.1:8333"}, wantErr: "AWS_ENDPOINT_URL: the endpoint URL must not carry credentials"},
		{name: "key without secret", url: "s3://models", env: map[string]string{"AWS_ACCESS_KEY_ID": "AKIA1"}, wantErr: "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"},
		{name: "secret without key", url: "s3://models", env: map[string]string{"AWS_SECRET_ACCESS_KEY": "hunter2"}, wantErr: "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"HOME": home}
			for k, v := range tc.env {
				env[k] = v
			}
			c, err := Resolve(tc.url, tc.flag, false, func(k string) string { return env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Resolve = %v, want an error containing %q", err, tc.wantErr)
				}
				for _, secret := range []string{"hunter2", "s3cr3t"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("the error shows a secret: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w := tc.want
			for _, f := range []struct{ name, got, want string }{
				{"URL", c.URL, w.URL}, {"Bucket", c.Bucket, w.Bucket}, {"Prefix", c.Prefix, w.Prefix},
				{"Endpoint", c.Endpoint, w.Endpoint}, {"EndpointFrom", c.EndpointFrom, w.EndpointFrom}, {"Region", c.Region, w.Region},
			} {
				if f.want != "" && f.got != f.want {
					t.Errorf("%s = %q, want %q", f.name, f.got, f.want)
				}
			}
			if tc.creds != "" && !strings.HasPrefix(c.Credentials.Source, tc.creds) {
				t.Errorf("credentials from %q, want %q", c.Credentials.Source, tc.creds)
			}
			for _, shown := range []string{c.String(), fmt.Sprintf("%v %+v %#v", c, c, c), fmt.Sprint(c.Credentials)} {
				if strings.Contains(shown, "s3cr3t") || strings.Contains(shown, "tok") {
					t.Errorf("a format shows a credential: %s", shown)
				}
			}
		})
	}
}

func TestKey(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	for _, tc := range []struct{ prefix, want string }{
		{"", "sha256/" + sha},
		{"prod/sluice", "prod/sluice/sha256/" + sha},
	} {
		c := Config{Bucket: "models", Prefix: tc.prefix}
		if got := c.Key(sha); got != tc.want {
			t.Errorf("Key with prefix %q = %q, want %q", tc.prefix, got, tc.want)
		}
		if got := c.ObjectURL(sha); got != "s3://models/"+tc.want {
			t.Errorf("ObjectURL = %q", got)
		}
	}
}
