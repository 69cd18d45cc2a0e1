package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"

	"github.com/csikit/csikit/csi/secrets"
)

// defaultTimeout bounds each RPC a command makes.
const defaultTimeout = 30 * time.Second

// secretFlags are the --secrets-file and --secret options.
type secretFlags struct {
	file string
	kv   mapFlag
}

func (s *secretFlags) add(fs *flag.FlagSet) {
	s.kv = mapFlag{}
	fs.StringVar(&s.file, "secrets-file", "", "read secrets from `FILE`, a JSON or YAML map of strings to strings (safer than --secret: a command line is visible to every user of the machine)")
	fs.Var(s.kv, "secret", "add the secret `KEY=VALUE` (repeatable; overrides --secrets-file)")
}

// load returns the secrets, or nil when none were given.
func (s *secretFlags) load() (map[string]string, error) {
	out := map[string]string{}
	if s.file != "" {
		b, err := os.ReadFile(s.file)
		if err != nil {
			return nil, err
		}
		// No parse error is quoted: it could hold a secret value.
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("secrets file %s is not a JSON or YAML map of strings to strings", s.file)
		}
		for k, v := range m {
			str, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("secrets file %s: the value of %q is not a string (quote it)", s.file, k)
			}
			out[k] = str
		}
	}
	maps.Copy(out, s.kv)
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// redactorFor returns a redactor for every secret value of secretMap and
// of msgs.
func redactorFor(secretMap map[string]string, msgs ...proto.Message) *secrets.Redactor {
	// Any request with a secrets map carries them for the redactor.
	return secrets.NewRedactor(append(msgs, &csi.CreateVolumeRequest{Secrets: secretMap})...)
}

func callCommand() *command {
	return &command{
		name:    "call",
		summary: "make one CSI call, request and response as protojson",
		synopsis: []string{
			"csikit call [OPTIONS] ENDPOINT SERVICE.METHOD [REQUEST]",
			"csikit call [OPTIONS] ENDPOINT SERVICE.METHOD - < request.json",
		},
		description: `Calls the CSI RPC SERVICE.METHOD (e.g. Node.NodeGetInfo,
Controller.CreateVolume, SnapshotMetadata.GetMetadataAllocated) on the
driver at ENDPOINT (unix:///path/csi.sock, /path/csi.sock or
tcp://host:port) and prints the response on stdout as protojson (the JSON
form of protocol buffers: lowerCamelCase field names, enums by name, int64
as strings). A streaming RPC prints each message as it arrives, one
indented JSON object each.

Methods come from the CSI spec's descriptors (csi.v1, spec v1.14): any
service and method it defines can be called. The method may be written
"Service.Method", "/csi.v1.Service/Method" or just "Method"; case does
not matter. An unknown name is answered with the closest methods.

REQUEST is the request message in protojson ("{}" when left out; "-"
reads it from stdin). Unknown fields are an error that lists the
message's fields.

Secrets given with --secrets-file or --secret are put into the request's
secrets field (the driver sees them as a CO would pass them). Every secret
value, also ones written in REQUEST, is replaced by ***stripped*** in all
output: the response, the driver's error message and csikit's own errors,
in its raw and escaped spellings (values shorter than 4 bytes are not
searched for).

A failed call prints the gRPC status code and message on stderr.`,
		exitStatus: `0      the call succeeded.
1      the driver answered with an error (its gRPC code and message are
       printed), or could not be reached (Unavailable).
2      bad options, an unknown method, a request that is not valid
       protojson for the method, or secrets given to a method without a
       secrets field.`,
		examples: `csikit call /run/csi/csi.sock Identity.GetPluginInfo
csikit call unix:///run/csi/csi.sock Node.NodeGetInfo
csikit call tcp://127.0.0.1:10000 Controller.CreateVolume \
    '{"name":"pvc-1","capacityRange":{"requiredBytes":"1073741824"},
      "volumeCapabilities":[{"mount":{},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}]}' \
    --secrets-file creds.yaml
csikit call /run/csi/csi.sock Controller.ListVolumes '{"maxEntries":10}' | jq .entries`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			var sf secretFlags
			sf.add(fs)
			timeout := fs.Duration("timeout", defaultTimeout, "give up on the call after `DURATION`")
			return func(e *env, args []string) int {
				if len(args) < 2 || len(args) > 3 {
					e.errorf("call: want ENDPOINT SERVICE.METHOD [REQUEST], got %d arguments (see csikit call --help)", len(args))
					return exitUsage
				}
				reqText := "{}"
				if len(args) == 3 {
					reqText = args[2]
				}
				if reqText == "-" {
					b, err := io.ReadAll(e.stdin)
					if err != nil {
						e.errorf("call: reading the request from stdin: %v", err)
						return exitUsage
					}
					reqText = string(b)
				}
				sec, err := sf.load()
				if err != nil {
					e.errorf("call: %v", err)
					return exitUsage
				}
				return call(e, args[0], args[1], reqText, sec, *timeout)
			}
		},
	}
}

// call runs the call command.
func call(e *env, ep, name, reqText string, sec map[string]string, timeout time.Duration) int {
	red := redactorFor(sec)
	m, err := resolve(name)
	if err != nil {
		e.errorf("call: %v", err)
		return exitUsage
	}
	req, err := m.NewRequest()
	if err != nil {
		e.errorf("call: %v", err)
		return exitUsage
	}
	if strings.TrimSpace(reqText) == "" {
		reqText = "{}"
	}
	if err := protojson.Unmarshal([]byte(reqText), req); err != nil {
		e.errorf("call: the request is not a valid %s in protojson: %s\n\tits fields: %s",
			req.ProtoReflect().Descriptor().FullName(), red.Redact(err.Error()), fieldList(req.ProtoReflect().Descriptor()))
		return exitUsage
	}
	if len(sec) > 0 {
		if err := putSecrets(req, sec); err != nil {
			e.errorf("call: %s: %v", m.Name(), err)
			return exitUsage
		}
	}
	red = redactorFor(sec, req)
	conn, err := dial(ep)
	if err != nil {
		e.errorf("call: %v", err)
		return exitUsage
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	err = invoke(ctx, conn, m, req, func(resp proto.Message) error {
		out, err := render(resp)
		if err != nil {
			return err
		}
		_, err = io.WriteString(e.stdout, red.Redact(out))
		return err
	})
	if err != nil {
		st := status.Convert(err)
		e.errorf("%s: %s: %s", m.Name(), st.Code(), red.Redact(st.Message()))
		return exitFail
	}
	return exitOK
}

// render formats m as indented protojson with a final newline, with every
// secret field stripped. protojson's own spacing is unstable on purpose;
// re-indenting makes the output the same from run to run.
func render(m proto.Message) (string, error) {
	b, err := protojson.Marshal(secrets.Strip(m))
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return "", err
	}
	buf.WriteByte('\n')
	return buf.String(), nil
}

// putSecrets merges sec into req's secrets map field (secrets given in
// the request lose to them).
func putSecrets(req proto.Message, sec map[string]string) error {
	r := req.ProtoReflect()
	fields := r.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !fd.IsMap() || !secrets.IsSecret(fd) || fd.MapKey().Kind() != protoreflect.StringKind || fd.MapValue().Kind() != protoreflect.StringKind {
			continue
		}
		mv := r.Mutable(fd).Map()
		for k, v := range sec {
			mv.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfString(v))
		}
		return nil
	}
	return fmt.Errorf("%s has no secrets field: leave out --secret and --secrets-file", r.Descriptor().Name())
}

// fieldList names the protojson fields of md.
func fieldList(md protoreflect.MessageDescriptor) string {
	var names []string
	for i := range md.Fields().Len() {
		names = append(names, md.Fields().Get(i).JSONName())
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "none (send {})"
	}
	return strings.Join(names, ", ")
}
