package etcdauth

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Apply makes etcd's roles and users what roles and users say, then
// turns authentication on. It may run again (a new host, a new cell): a
// role's grants and a user's roles are set to the plan's, those no longer
// planned revoked; roles and users not in the plan are left alone. Users
// have no password: they authenticate with their certificates. The root
// user, which etcd needs to turn auth on, gets rootPassword ("" keeps it
// certificate-only too: a certificate whose name is "root").
func Apply(ctx context.Context, cli *clientv3.Client, roles []Role, users []User, rootPassword string) error {
	for _, r := range roles {
		if err := applyRole(ctx, cli, r); err != nil {
			return fmt.Errorf("etcd role %s: %w", r.Name, err)
		}
	}
	root := User{Name: "root", Roles: []string{RootRole}}
	for _, u := range append(slices.Clone(users), root) {
		pw := ""
		if u.Name == "root" {
			pw = rootPassword
		}
		if err := applyUser(ctx, cli, u, pw); err != nil {
			return fmt.Errorf("etcd user %s: %w", u.Name, err)
		}
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("enable etcd auth: %w", err)
	}
	return nil
}

func applyRole(ctx context.Context, cli *clientv3.Client, r Role) error {
	if _, err := cli.RoleAdd(ctx, r.Name); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
		return err
	}
	have, err := cli.RoleGet(ctx, r.Name)
	if err != nil {
		return err
	}
	want := map[Perm]bool{}
	for _, p := range r.Perms {
		want[p] = true
	}
	for _, p := range have.Perm {
		got := Perm{Type: clientv3.PermissionType(p.PermType), Key: string(p.Key), RangeEnd: string(p.RangeEnd)}
		if want[got] {
			delete(want, got)
			continue
		}
		if _, err := cli.RoleRevokePermission(ctx, r.Name, got.Key, got.RangeEnd); err != nil {
			return fmt.Errorf("revoke %q: %w", got.Key, err)
		}
	}
	for _, p := range r.Perms {
		if !want[p] {
			continue
		}
		if _, err := cli.RoleGrantPermission(ctx, r.Name, p.Key, p.RangeEnd, p.Type); err != nil {
			return fmt.Errorf("grant %q: %w", p.Key, err)
		}
	}
	return nil
}

func applyUser(ctx context.Context, cli *clientv3.Client, u User, password string) error {
	_, err := cli.UserAddWithOptions(ctx, u.Name, password, &clientv3.UserAddOptions{NoPassword: password == ""})
	switch {
	case errors.Is(err, rpctypes.ErrUserAlreadyExist):
		if password != "" {
			if _, err := cli.UserChangePassword(ctx, u.Name, password); err != nil {
				return err
			}
		}
	case err != nil:
		return err
	}
	have, err := cli.UserGet(ctx, u.Name)
	if err != nil {
		return err
	}
	for _, r := range have.Roles {
		if !slices.Contains(u.Roles, r) {
			if _, err := cli.UserRevokeRole(ctx, u.Name, r); err != nil {
				return fmt.Errorf("revoke role %s: %w", r, err)
			}
		}
	}
	for _, r := range u.Roles {
		if !slices.Contains(have.Roles, r) {
			if _, err := cli.UserGrantRole(ctx, u.Name, r); err != nil {
				return fmt.Errorf("grant role %s: %w", r, err)
			}
		}
	}
	return nil
}
