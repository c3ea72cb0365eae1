#!/usr/bin/env bash
# deploy/install.sh: install Berth's roles on one Linux machine with systemd.
#
# The same script provisions the Vagrant lab (see the Vagrantfile) and an
# operator's own VMs: everything about the machine comes from flags or an
# env file, nothing from Vagrant. It installs the binary, renders one HCL
# config per role with `berth config render` (the templates are compiled
# into the binary, so configs always match the binary's options), checks
# them with `berth config validate`, installs the systemd units from
# deploy/systemd/, and enables and starts them. Running it again with the
# same flags changes nothing and restarts nothing; with a new binary or new
# settings it restarts only the units whose files changed.
set -euo pipefail

prog=install.sh
here=$(cd "$(dirname "$0")" && pwd)
roles_known="etcd server conductor agent"

usage() {
    cat <<'EOF'
Usage: install.sh --binary PATH --name NAME --address IP --etcd NAME=IP[,NAME=IP]...
                  --roles ROLE[,ROLE]... [--cell CELL] [--data-dir DIR]
                  [--var KEY=VALUE]... [--admin-password-file FILE]
                  [--tls-dir DIR | --no-tls]
                  [--env-file FILE] [--root DIR] [--no-start]

Installs Berth on this machine: the binary as /usr/local/bin/berth, one
config per role as /etc/berth/ROLE.hcl, one unit per role as
/etc/systemd/system/berth-ROLE.service, then enables and starts the units.

  --binary PATH     the berth binary to install (built for this machine)
  --name NAME       this machine's name: its etcd member name and its
                    compute host name (letters, digits, ".", "_", "-")
  --address IP      this machine's address (IP or DNS name): its roles
                    listen on it and the other machines reach it there
  --etcd LIST       every etcd member as NAME=ADDRESS, comma separated: the same
                    list on every machine (client port 2379, peer port 2380)
  --roles LIST      what runs here, comma separated: etcd, server,
                    conductor, agent
  --cell CELL       the cell of this machine's conductor and agent
                    (required with either)
  --data-dir DIR    where the roles keep their state (default /var/lib/berth)
  --var KEY=VALUE   a template setting for `berth config render -var`, e.g.
                    driver=process, vcpus=16, initial_cluster_state=existing;
                    repeatable
  --admin-password-file FILE
                    the identity admin's password (server role), read from
                    FILE: its bcrypt hash goes into server.hcl, whose APIs
                    check identity tokens (never noauth). Without it the
                    first install makes a random one in
                    /etc/berth/identity-admin-password (root only); later
                    runs keep the hash in /etc/berth/identity-admin.bcrypt.
                    Give the same file to every server of a deployment
  --tls-dir DIR     the lab CA from `berth tls ca -dir DIR` (copy DIR to
                    every machine): ca.pem, and NAME.pem and NAME-key.pem
                    from `berth tls cert -dir DIR -name NAME -host ADDRESS`,
                    or else ca-key.pem, with which this script issues them.
                    They are installed in /etc/berth/tls (never ca-key.pem)
                    and every listener, etcd member and etcd client of the
                    machine uses them: deployments serve TLS by default.
                    Later runs reuse what /etc/berth/tls holds
  --no-tls          render plain HTTP everywhere instead (no certificates)
  --env-file FILE   read settings from FILE first; flags override it. Lines
                    are KEY=VALUE (no quotes, # comments) with KEY one of
                    BERTH_BINARY BERTH_NAME BERTH_ADDRESS BERTH_ETCD
                    BERTH_ROLES BERTH_CELL BERTH_DATA_DIR BERTH_ROOT
                    BERTH_ADMIN_PASSWORD_FILE BERTH_TLS_DIR
                    BERTH_NO_START and BERTH_NO_TLS (1 or 0) and BERTH_VAR (one KEY=VALUE
                    template setting; repeat the line for more)
  --root DIR        install into the tree under DIR instead of / (tests,
                    packaging): no system user is created and nothing is
                    started; units are enabled in the tree with
                    `systemctl --root` unless --no-start
  --no-start        install the files only: do not enable or start units
  -h, --help        this text

Example (one of three machines, each running every role):
  install.sh --binary ./berth --name node1 --address 10.0.0.11 \
      --etcd node1=10.0.0.11,node2=10.0.0.12,node3=10.0.0.13 \
      --roles etcd,server,conductor,agent --cell cell1
EOF
}

# die reports a usage or input mistake: exit 2, like berth itself.
die() {
    echo "$prog: $*" >&2
    echo "$prog: run '$prog --help' for usage" >&2
    exit 2
}

# fail reports a failed installation step: exit 1.
fail() {
    echo "$prog: $*" >&2
    exit 1
}

say() { echo "$prog: $*"; }

binary='' name='' address='' etcd='' roles='' cell='' data_dir='' root='' no_start='' env_file='' admin_password_file=''
tls_dir='' no_tls=''
vars=()
flag_vars=()
set_flags=' '

# need_value makes "--flag" at the end of the line an error, not a crash.
need_value() {
    [ "$2" -ge 2 ] || die "$1 needs a value"
}

while [ $# -gt 0 ]; do
    arg=$1
    # --flag=value is the same as --flag value.
    case $arg in
    --*=*)
        set -- "${arg%%=*}" "${arg#*=}" "${@:2}"
        arg=$1
        ;;
    esac
    case $arg in
    -h | --help)
        usage
        exit 0
        ;;
    --binary | --name | --address | --etcd | --roles | --cell | --data-dir | --root | --env-file | --admin-password-file | --tls-dir)
        need_value "$arg" $#
        key=${arg#--}
        key=${key//-/_}
        printf -v "$key" '%s' "$2"
        set_flags="$set_flags$key "
        shift 2
        ;;
    --var)
        need_value "$arg" $#
        flag_vars+=("$2")
        shift 2
        ;;
    --no-start)
        no_start=1
        set_flags="${set_flags}no_start "
        shift
        ;;
    --no-tls)
        no_tls=1
        set_flags="${set_flags}no_tls "
        shift
        ;;
    *)
        die "unknown argument '$arg'"
        ;;
    esac
done

# read_env_file sets every setting the command line did not.
read_env_file() {
    local file=$1 line key value n=0
    [ -f "$file" ] || die "--env-file $file: no such file"
    while IFS= read -r line || [ -n "$line" ]; do
        n=$((n + 1))
        line=${line%$'\r'}
        case $line in '' | '#'*) continue ;; esac
        case $line in
        *=*) ;;
        *) die "$file:$n: want KEY=VALUE, got '$line'" ;;
        esac
        key=${line%%=*}
        value=${line#*=}
        case $key in
        BERTH_BINARY | BERTH_NAME | BERTH_ADDRESS | BERTH_ETCD | BERTH_ROLES | BERTH_CELL | BERTH_DATA_DIR | BERTH_ROOT | BERTH_ADMIN_PASSWORD_FILE | BERTH_TLS_DIR)
            key=${key#BERTH_}
            key=$(printf '%s' "$key" | tr '[:upper:]' '[:lower:]')
            case $set_flags in *" $key "*) continue ;; esac
            printf -v "$key" '%s' "$value"
            ;;
        BERTH_NO_START)
            case $set_flags in *" no_start "*) continue ;; esac
            case $value in
            1) no_start=1 ;;
            0 | '') no_start='' ;;
            *) die "$file:$n: BERTH_NO_START must be 1 or 0, got '$value'" ;;
            esac
            ;;
        BERTH_NO_TLS)
            case $set_flags in *" no_tls "*) continue ;; esac
            case $value in
            1) no_tls=1 ;;
            0 | '') no_tls='' ;;
            *) die "$file:$n: BERTH_NO_TLS must be 1 or 0, got '$value'" ;;
            esac
            ;;
        BERTH_VAR)
            # One setting a line, so a value may hold blanks.
            vars+=("$value")
            ;;
        *)
            die "$file:$n: unknown key '$key' (want BERTH_BINARY, BERTH_NAME, BERTH_ADDRESS, BERTH_ETCD, BERTH_ROLES, BERTH_CELL, BERTH_DATA_DIR, BERTH_ROOT, BERTH_ADMIN_PASSWORD_FILE, BERTH_TLS_DIR, BERTH_NO_START, BERTH_NO_TLS or BERTH_VAR)"
            ;;
        esac
    done <"$file"
}

if [ -n "$env_file" ]; then
    read_env_file "$env_file"
fi
# A setting in both the file and the command line takes the command line's
# value (berth config render refuses a -var given twice).
vars+=("${flag_vars[@]+"${flag_vars[@]}"}")
for v in "${vars[@]+"${vars[@]}"}"; do
    case ${v%%=*} in
    '' | [!A-Za-z_]* | *[!A-Za-z0-9_]*) die "--var '$v': want KEY=VALUE, KEY a template variable name" ;;
    esac
    case $v in *=*) ;; *) die "--var '$v': want KEY=VALUE" ;; esac
done
declare -A var_last=()
for v in "${vars[@]+"${vars[@]}"}"; do
    var_last[${v%%=*}]=$v
done
deduped=()
for v in "${vars[@]+"${vars[@]}"}"; do
    k=${v%%=*}
    if [ -n "${var_last[$k]+x}" ]; then
        deduped+=("${var_last[$k]}")
        unset "var_last[$k]"
    fi
done
vars=("${deduped[@]+"${deduped[@]}"}")
data_dir=${data_dir:-/var/lib/berth}

# ---- check every input before touching anything

valid_name() {
    case $1 in
    '' | *[!A-Za-z0-9._-]*) return 1 ;;
    esac
}

# valid_address accepts an IPv4 address, an IPv6 address or a DNS name:
# what the roles bind to and the others reach.
valid_address() {
    local a=$1 part rest
    case $a in
    '' | .* | *. | *..*) return 1 ;;
    *:*)
        case $a in *[!0-9A-Fa-f:]*) return 1 ;; esac
        return 0
        ;;
    *[!0-9.]*)
        case $a in -* | *[!A-Za-z0-9.-]*) return 1 ;; esac
        return 0
        ;;
    esac
    rest=$a.
    for _ in 1 2 3 4; do
        part=${rest%%.*}
        rest=${rest#*.}
        [ -n "$part" ] && [ ${#part} -le 3 ] && [ "$((10#$part))" -le 255 ] || return 1
    done
    [ -z "$rest" ]
}

[ -n "$binary" ] || die "--binary is required (the berth binary to install)"
[ -f "$binary" ] || die "--binary $binary: no such file"
[ -x "$binary" ] || die "--binary $binary: not executable"
[ -n "$name" ] || die "--name is required (this machine's etcd member and compute host name)"
valid_name "$name" || die "--name '$name': use letters, digits, '.', '_' and '-' only"
[ -n "$address" ] || die "--address is required (this machine's IP address or DNS name)"
valid_address "$address" || die "--address '$address': not an IP address or DNS name"
[ -n "$etcd" ] || die "--etcd is required (every etcd member as NAME=IP, comma separated)"
[ -n "$roles" ] || die "--roles is required (any of: ${roles_known// /, })"
case $data_dir in /*) ;; *) die "--data-dir '$data_dir': must be an absolute path" ;; esac
if [ -n "$root" ]; then
    case $root in /*) ;; *) root=$(pwd)/$root ;; esac
    root=${root%/}
fi

etcd_members=' '
etcd_self_ip=''
IFS=, read -r -a members <<<"$etcd"
for m in "${members[@]}"; do
    case $m in
    *=*) ;;
    *) die "--etcd: '$m' is not NAME=IP" ;;
    esac
    mname=${m%%=*}
    mip=${m#*=}
    valid_name "$mname" || die "--etcd: member name '$mname' in '$m': use letters, digits, '.', '_' and '-' only"
    valid_address "$mip" || die "--etcd: '$mip' in '$m' is not an IP address or DNS name"
    case $etcd_members in *" $mname "*) die "--etcd: member '$mname' is listed twice" ;; esac
    etcd_members="$etcd_members$mname "
    if [ "$mname" = "$name" ]; then
        etcd_self_ip=$mip
    fi
done

want=' '
IFS=, read -r -a role_list <<<"$roles"
for r in "${role_list[@]}"; do
    case " $roles_known " in
    *" $r "*) ;;
    *) die "--roles: unknown role '$r' (want any of: ${roles_known// /, })" ;;
    esac
    case $want in *" $r "*) die "--roles: '$r' is listed twice" ;; esac
    want="$want$r "
done
has_role() { case $want in *" $1 "*) return 0 ;; esac; return 1; }

if has_role etcd; then
    [ -n "$etcd_self_ip" ] || die "--roles has etcd but --etcd does not list this machine ('$name'): add $name=$address"
    [ "$etcd_self_ip" = "$address" ] || die "--etcd lists $name=$etcd_self_ip but --address is $address"
fi
if has_role conductor || has_role agent; then
    [ -n "$cell" ] || die "--cell is required with the conductor and agent roles"
fi
if [ -n "$cell" ]; then
    valid_name "$cell" || die "--cell '$cell': use letters, digits, '.', '_' and '-' only"
fi
if [ -n "$admin_password_file" ]; then
    [ -f "$admin_password_file" ] || die "--admin-password-file $admin_password_file: no such file"
    [ -r "$admin_password_file" ] || die "--admin-password-file $admin_password_file: not readable"
    [ -s "$admin_password_file" ] || die "--admin-password-file $admin_password_file: empty"
fi
tls_conf_dir=/etc/berth/tls
if [ -n "$tls_dir" ] && [ -n "$no_tls" ]; then
    die "--tls-dir and --no-tls: choose one"
fi
if [ -n "$tls_dir" ]; then
    [ -f "$tls_dir/ca.pem" ] || die "--tls-dir $tls_dir: no ca.pem (make the lab CA with: berth tls ca -dir $tls_dir)"
    if [ ! -f "$tls_dir/$name.pem" ] || [ ! -f "$tls_dir/$name-key.pem" ]; then
        [ -f "$tls_dir/ca-key.pem" ] ||
            die "--tls-dir $tls_dir: neither $name.pem and $name-key.pem nor ca-key.pem to issue them (berth tls cert -dir DIR -name $name -host $address)"
    fi
elif [ -z "$no_tls" ] && { [ ! -f "$root$tls_conf_dir/ca.pem" ] || [ ! -f "$root$tls_conf_dir/$name.pem" ] || [ ! -f "$root$tls_conf_dir/$name-key.pem" ]; }; then
    die "deployments serve TLS: give --tls-dir DIR with the lab CA (berth tls ca -dir DIR on one machine, then copy DIR to every machine), or --no-tls for plain HTTP"
fi
for r in $want; do
    [ -f "$here/systemd/berth-$r.service" ] || fail "$here/systemd/berth-$r.service is missing: run install.sh from a complete deploy/ directory"
done

if [ -z "$root" ] && [ "$(id -u)" != 0 ]; then
    fail "installing into / needs root (run with sudo, or use --root DIR)"
fi
if [ -z "$root" ] && [ -z "$no_start" ]; then
    command -v systemctl >/dev/null 2>&1 || fail "systemctl not found: this script installs systemd units (use --no-start to install the files only)"
    [ -d /run/systemd/system ] || fail "systemd is not running here (use --no-start to install the files only)"
fi

# ---- install

bin_path=/usr/local/bin/berth
conf_dir=/etc/berth
unit_dir=/etc/systemd/system

# changed lists the roles whose binary, config or unit changed: those are
# restarted; the others are only started (a no-op when running).
changed=' '
mark_changed() { case $changed in *" $1 "*) ;; *) changed="$changed$1 " ;; esac; }

# put SRC DEST MODE ROLE...: install SRC as DEST (within the root) unless
# DEST already has that content and mode, atomically (a running berth keeps
# its old file), and mark ROLE... changed when it did.
put() {
    local src=$1 dest=$root$2 mode=$3 tmp
    shift 3
    if [ -f "$dest" ] && cmp -s "$src" "$dest" && [ "$(stat -c %a "$dest")" = "${mode#0}" ]; then
        return 0
    fi
    mkdir -p "$(dirname "$dest")"
    tmp=$(mktemp "$dest.XXXXXX")
    cp "$src" "$tmp"
    chmod "$mode" "$tmp"
    if [ -z "$root" ] && [ "$mode" = 0640 ]; then
        chgrp berth "$tmp"
    fi
    mv -f "$tmp" "$dest"
    say "installed $dest"
    for r in "$@"; do mark_changed "$r"; done
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The system user every unit runs as (User=berth). Packages and images made
# with --root create it from usr/lib/sysusers.d/berth.conf at boot.
printf 'u berth - "Berth control plane" %s /usr/sbin/nologin\n' "$data_dir" >"$work/sysusers.conf"
put "$work/sysusers.conf" /usr/lib/sysusers.d/berth.conf 0644
if [ -z "$root" ] && ! getent passwd berth >/dev/null; then
    useradd --system --user-group --home-dir "$data_dir" --no-create-home --shell /usr/sbin/nologin \
        --comment "Berth control plane" berth || fail "cannot create the system user berth"
    say "created system user berth"
fi

mkdir -p "$root$data_dir" "$root$conf_dir"
if [ -z "$root" ]; then
    chown berth:berth "$root$data_dir"
    chmod 0750 "$root$data_dir"
    # Configs may hold tokens (placement auth = "tokens"): readable by berth only.
    chown root:berth "$root$conf_dir"
    chmod 0750 "$root$conf_dir"
fi

# Every role runs the same binary: a new one restarts them all.
# shellcheck disable=SC2086 # $want is a list of role words
put "$binary" "$bin_path" 0755 $want
berth=$root$bin_path

# The machine's certificate, key and the lab CA, in /etc/berth/tls: issued
# here when --tls-dir holds the CA's key and not this machine's pair (its
# names: --name and --address), never re-issued while they are there (a
# new pair would restart every role for nothing). The key is readable by
# the berth group only; the CA's key is never installed.
# shellcheck disable=SC2086 # $want is a list of role words
if [ -n "$tls_dir" ]; then
    src=$tls_dir
    if [ ! -f "$tls_dir/$name.pem" ] || [ ! -f "$tls_dir/$name-key.pem" ]; then
        if [ -f "$root$tls_conf_dir/$name.pem" ] && [ -f "$root$tls_conf_dir/$name-key.pem" ]; then
            src=$root$tls_conf_dir
        else
            mkdir -p "$work/tls"
            cp "$tls_dir/ca.pem" "$tls_dir/ca-key.pem" "$work/tls/"
            "$berth" tls cert -dir "$work/tls" -name "$name" -host "$address,$name" >/dev/null ||
                fail "berth tls cert failed (see above)"
            src=$work/tls
            say "issued a certificate for $name ($address) with the CA in $tls_dir"
        fi
    fi
    put "$tls_dir/ca.pem" "$tls_conf_dir/ca.pem" 0644 $want
    put "$src/$name.pem" "$tls_conf_dir/$name.pem" 0644 $want
    put "$src/$name-key.pem" "$tls_conf_dir/$name-key.pem" 0640 $want
fi

# Render with the binary being installed, so templates and options match.
render_args=(-name "$name" -address "$address" -etcd "$etcd" -data-dir "$data_dir")
if [ -n "$no_tls" ]; then
    render_args+=(-no-tls)
else
    render_args+=(-tls-dir "$tls_conf_dir")
fi
if [ -n "$cell" ]; then
    render_args+=(-cell "$cell")
fi
for v in "${vars[@]+"${vars[@]}"}"; do
    render_args+=(-var "$v")
done

# The identity admin of a server: server.hcl's APIs check identity tokens,
# so someone must be able to log in. Its bcrypt hash is kept in
# identity-admin.bcrypt and re-made only when --admin-password-file gives
# a password other than the one hashed (bcrypt salts: hashing again at
# every run would change server.hcl and restart the server for nothing).
admin_hash=$conf_dir/identity-admin.bcrypt
admin_sum=$conf_dir/identity-admin.sha256
if has_role server; then
    pw_file=''
    if [ -n "$admin_password_file" ]; then
        pw_file=$admin_password_file
    elif [ ! -f "$root$admin_hash" ]; then
        head -c 24 /dev/urandom | base64 | tr -d '\n/+=' >"$work/admin-password"
        put "$work/admin-password" "$conf_dir/identity-admin-password" 0600
        pw_file=$root$conf_dir/identity-admin-password
        say "made the identity admin's password: $conf_dir/identity-admin-password (log in as admin, project admin)"
    fi
    if [ -n "$pw_file" ]; then
        sum=$(sha256sum <"$pw_file" | cut -d' ' -f1)
        if [ ! -f "$root$admin_hash" ] || [ "$(cat "$root$admin_sum" 2>/dev/null)" != "$sum" ]; then
            "$berth" identity hash-password <"$pw_file" >"$work/admin.bcrypt" ||
                fail "berth identity hash-password failed (see above)"
            put "$work/admin.bcrypt" "$admin_hash" 0600
            echo "$sum" >"$work/admin.sha256"
            put "$work/admin.sha256" "$admin_sum" 0600
        fi
    fi
    render_args+=(-admin-password-hash "$(cat "$root$admin_hash")")
fi
for r in $want; do
    out=$work/$r.hcl
    "$berth" config render "$r" "${render_args[@]}" -o "$out" ||
        fail "berth config render $r failed (see above)"
    # validate -role reads the certificates the config names: under
    # --root they are in the tree, so a copy rendered for the tree is
    # what is checked.
    check=$out
    if [ -n "$root" ] && [ -z "$no_tls" ]; then
        check=$work/$r.check.hcl
        "$berth" config render "$r" "${render_args[@]}" -tls-dir "$root$tls_conf_dir" -o "$check" ||
            fail "berth config render $r failed (see above)"
    fi
    "$berth" config validate -role "$r" "$check" >"$work/validate.out" 2>&1 || {
        cat "$work/validate.out" >&2
        fail "the rendered $r config does not validate"
    }
    put "$out" "$conf_dir/$r.hcl" 0640 "$r"
    put "$here/systemd/berth-$r.service" "$unit_dir/berth-$r.service" 0644 "$r"

    # A role beside a local etcd member wants that member started first (the
    # units order themselves After=berth-etcd.service already).
    dropin=$unit_dir/berth-$r.service.d/10-local-etcd.conf
    if [ "$r" != etcd ] && has_role etcd; then
        printf '# Written by install.sh: this machine runs an etcd member.\n[Unit]\nWants=berth-etcd.service\n' >"$work/dropin.conf"
        put "$work/dropin.conf" "$dropin" 0644 "$r"
    elif [ -e "$root$dropin" ]; then
        rm -f "$root$dropin"
        rmdir "$(dirname "$root$dropin")" 2>/dev/null || true
        say "removed $root$dropin"
        mark_changed "$r"
    fi
done

scheme=https
if [ -n "$no_tls" ]; then
    scheme=http
fi

# url_of ADDRESS PORT: a URL of the deployment's scheme, with an IPv6
# address in brackets.
url_of() {
    case $1 in
    *:*) echo "$scheme://[$1]:$2" ;;
    *) echo "$scheme://$1:$2" ;;
    esac
}

# etcdctl and the berth CLI find this deployment from any login shell.
{
    echo "# Written by install.sh: where etcdctl and the berth CLI reach this deployment."
    eps=''
    for m in "${members[@]}"; do
        eps="$eps${eps:+,}$(url_of "${m#*=}" 2379)"
    done
    echo "export ETCDCTL_API=3"
    echo "export ETCDCTL_ENDPOINTS=$eps"
    if [ -z "$no_tls" ]; then
        # The members want a client certificate: the machine's (its key is
        # readable by root and the berth group), and the openstack and
        # berth CLIs verify the APIs with the lab CA.
        echo "export ETCDCTL_CACERT=$tls_conf_dir/ca.pem"
        echo "export ETCDCTL_CERT=$tls_conf_dir/$name.pem"
        echo "export ETCDCTL_KEY=$tls_conf_dir/$name-key.pem"
        echo "export OS_CACERT=$tls_conf_dir/ca.pem"
    fi
    if has_role server; then
        echo "export BERTH_API=$(url_of "$address" 8774)"
    fi
} >"$work/profile.sh"
put "$work/profile.sh" /etc/profile.d/berth.sh 0644

# What this machine was installed with: `install.sh --env-file
# /etc/berth/deploy.env --binary NEW` upgrades it with the same settings.
{
    echo "# Written by install.sh; reuse with: install.sh --env-file $conf_dir/deploy.env"
    echo "BERTH_NAME=$name"
    echo "BERTH_ADDRESS=$address"
    echo "BERTH_ETCD=$etcd"
    echo "BERTH_ROLES=$roles"
    echo "BERTH_CELL=$cell"
    echo "BERTH_DATA_DIR=$data_dir"
    # The certificates are in /etc/berth/tls now: no BERTH_TLS_DIR needed.
    echo "BERTH_NO_TLS=${no_tls:-0}"
    for v in "${vars[@]+"${vars[@]}"}"; do
        echo "BERTH_VAR=$v"
    done
} >"$work/deploy.env"
put "$work/deploy.env" "$conf_dir/deploy.env" 0644

for r in $roles_known; do
    if ! has_role "$r" && [ -e "$root$unit_dir/berth-$r.service" ]; then
        # Removing an etcd member needs `etcdctl member remove` first; never
        # stop a role behind the operator's back.
        say "note: berth-$r.service is installed but not in --roles; left as it is (disable it yourself)"
    fi
done

units=()
for r in $want; do units+=("berth-$r.service"); done

if [ -n "$no_start" ]; then
    say "installed ${units[*]} (--no-start: not enabled, not started)"
    exit 0
fi
if [ -n "$root" ]; then
    command -v systemctl >/dev/null 2>&1 || fail "systemctl not found: cannot enable units under $root (use --no-start)"
    # Quiet: in a bare tree systemctl warns that multi-user.target is missing.
    systemctl --root="$root" enable "${units[@]}" >"$work/enable.out" 2>&1 || {
        cat "$work/enable.out" >&2
        fail "systemctl --root=$root enable ${units[*]} failed"
    }
    say "enabled ${units[*]} under $root (--root: not started)"
    exit 0
fi

systemctl daemon-reload
systemctl enable "${units[@]}" >/dev/null
# etcd first, so the others find it; starting does not wait for the
# member's quorum (Type=simple): the others retry until etcd answers.
for r in $roles_known; do
    has_role "$r" || continue
    case $changed in
    *" $r "*)
        systemctl restart "berth-$r.service"
        say "restarted berth-$r.service"
        ;;
    *)
        systemctl start "berth-$r.service"
        say "berth-$r.service running"
        ;;
    esac
done
