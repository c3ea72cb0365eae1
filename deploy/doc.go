// Package deploy holds what installs Berth on machines: install.sh, the
// systemd units under systemd/, and lab-nodes.conf, the Vagrant lab's
// machines and roles (read by the Vagrantfile at the repository root). Its
// tests run the real install.sh into directory trees, one per lab machine,
// with a freshly built binary, and check what it installed.
package deploy
