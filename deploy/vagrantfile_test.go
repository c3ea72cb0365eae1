package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// vagrantMachine is what testdata/vagrantfile_provisions.rb reads of one
// machine of the Vagrantfile.
type vagrantMachine struct {
	Hostname   string             `json:"hostname"`
	IP         string             `json:"ip"`
	Provisions []vagrantProvision `json:"provisions"`
}

// vagrantProvision is one node.vm.provision call.
type vagrantProvision struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Destination string   `json:"destination"`
	Inline      string   `json:"inline"`
	Args        []string `json:"args"`
}

// TestVagrantfileProvisioning runs each lab VM's provisioning as Vagrant
// would, minus the VM: the Vagrantfile is loaded by Ruby with a recording
// stand-in for Vagrant's config, its file uploads are copied into a
// directory standing for the VM, and its shell provisioners run there with
// their own arguments (plus --root and --no-start). What install.sh then
// installed must be what lab-nodes.conf says. `vagrant validate` (in
// .ci/run) checks the Vagrantfile against Vagrant itself; this checks that
// what it runs works.
func TestVagrantfileProvisioning(t *testing.T) {
	ruby, err := exec.LookPath("ruby")
	if err != nil {
		t.Skip("ruby not installed (it comes with Debian's vagrant package)")
	}
	out, err := exec.Command(ruby, "testdata/vagrantfile_provisions.rb", "../Vagrantfile").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("load the Vagrantfile: %v\n%s", err, stderr)
	}
	var machines map[string]vagrantMachine
	if err := json.Unmarshal(out, &machines); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	nodes, vars := readLab(t)
	if len(machines) != len(nodes) {
		t.Errorf("the Vagrantfile defines %d machines, lab-nodes.conf %d", len(machines), len(nodes))
	}
	for _, n := range nodes {
		t.Run(n.Name, func(t *testing.T) {
			m, ok := machines[n.Name]
			if !ok {
				t.Fatalf("no machine %s in the Vagrantfile", n.Name)
			}
			if m.Hostname != n.Name || m.IP != n.Address {
				t.Errorf("hostname %s ip %s, lab-nodes.conf says %s at %s", m.Hostname, m.IP, n.Name, n.Address)
			}
			vm := t.TempDir()
			root := t.TempDir()
			ran := false
			for _, p := range m.Provisions {
				switch p.Type {
				case "file":
					// What the upload would put on the VM: the binary dir gets
					// the binary the trigger builds, deploy/ itself.
					dest := filepath.Join(vm, p.Destination)
					switch filepath.Base(p.Source) {
					case ".vagrant-bin":
						copyFile(t, berthBin, filepath.Join(dest, "berth"), 0o644) // scp may drop the mode; the provisioner chmods
					case ".vagrant-tls":
						// The lab CA the trigger makes on the host.
						if out, err := exec.Command(berthBin, "tls", "ca", "-dir", dest).CombinedOutput(); err != nil {
							t.Fatalf("berth tls ca: %v\n%s", err, out)
						}
					case "deploy":
						if err := os.CopyFS(dest, os.DirFS(p.Source)); err != nil {
							t.Fatal(err)
						}
					default:
						t.Fatalf("provision %s uploads %s: unknown to this test", p.Name, p.Source)
					}
				case "shell":
					if p.Name == "etcdctl" {
						if !strings.Contains(p.Inline, "etcd-client") {
							t.Errorf("provision etcdctl does not install Debian's etcd-client:\n%s", p.Inline)
						}
						continue // apt-get on the VM
					}
					script := inVM(p.Inline, vm)
					args := append([]string{"-c", script, "provision-" + p.Name}, inVMAll(p.Args, vm)...)
					if p.Name == "berth" {
						args = append(args, "--root", root, "--no-start")
						ran = true
					}
					if out, err := exec.Command("bash", args...).CombinedOutput(); err != nil {
						t.Fatalf("provision %s: %v\n%s", p.Name, err, out)
					}
				default:
					t.Fatalf("provision %s has type %q, unknown to this test", p.Name, p.Type)
				}
			}
			if !ran {
				t.Fatal("no provision named berth runs install.sh")
			}
			checkInstalled(t, root, n, nodes, vars)
			if i := slices.IndexFunc(m.Provisions, func(p vagrantProvision) bool { return p.Name == "clean" }); i != 0 {
				t.Errorf("provision clean is at %d, want first: an upload into an existing directory nests", i)
			}
		})
	}
}

// inVM maps the VM's absolute paths under /home/vagrant into the directory
// standing for the VM.
func inVM(s, vm string) string {
	return strings.ReplaceAll(s, "/home/vagrant/", vm+"/home/vagrant/")
}

func inVMAll(ss []string, vm string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = inVM(s, vm)
	}
	return out
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}
