#!/bin/bash
# Entrypoint of the localhost/mysql:9.7-debian image (Oracle MySQL 9.7 from Debian sid's
# packages, built without Docker by cluster/images/build.sh). It follows the environment
# contract of the official `mysql` image (docker-library/mysql), written anew:
#
#   MYSQL_ROOT_PASSWORD        root password (required on first start unless one of the next two)
#   MYSQL_ALLOW_EMPTY_PASSWORD any non-empty value: root keeps an empty password
#   MYSQL_RANDOM_ROOT_PASSWORD any non-empty value: a random root password, printed to stdout
#   MYSQL_ROOT_HOST            host part of the second root account (default %; none if localhost)
#   MYSQL_DATABASE             database created on first start
#   MYSQL_USER/MYSQL_PASSWORD  account <user>@% created on first start, ALL on MYSQL_DATABASE
#   MYSQL_ONETIME_PASSWORD     any non-empty value: the root@% password is expired
#   MYSQL_INITDB_SKIP_TZINFO   any non-empty value: the time zone tables stay empty
#   each of them also as <NAME>_FILE (the value read from that file, e.g. a mounted Secret)
#   /docker-entrypoint-initdb.d/  on first start, in name order: *.sh (run when executable,
#                              else sourced), *.sql, *.sql.gz|bz2|xz|zst (run as root, in
#                              MYSQL_DATABASE when set)
#
# It also reproduces, ON PURPOSE, what the official entrypoint does that an operator meets
# (this image stands in for mysql:9.7 on the local cluster: its tests must see the same
# server behaviour, including the bad parts). Each place says "reproduced on purpose":
#   - MYSQL_ROOT_PASSWORD, MYSQL_PASSWORD, MYSQL_USER, MYSQL_ROOT_HOST and MYSQL_DATABASE go
#     into SQL without escaping, and the root password into a client option file unquoted
#     ([client] user=root, password=<pw>);
#   - initialisation is mysqld --initialize-insecure, then a temporary server with
#     --daemonize --skip-networking (TCP 3306 opens only once everything is done), then
#     mysqladmin shutdown, then the real server in the foreground;
#   - "already initialised" means only that $DATADIR/mysql exists. With set -e, a failed
#     statement (a password holding a single quote) ends the script half-way; the restarted
#     container then starts that data directory as it is: root@localhost with an EMPTY
#     password, no root@%, no user, no database;
#   - it starts as root, creates and chowns the directories, then re-runs itself as mysql
#     with gosu; a first argument starting with - means options for mysqld, and
#     --help/--version style arguments skip all setup.
set -eo pipefail
shopt -s nullglob

# --- logging -------------------------------------------------------------------------------

# entry_log LEVEL TEXT... (or the text on stdin): one line in the official image's format
entry_log() {
	local level=$1
	shift
	local text="$*"
	if [ "$#" -eq 0 ]; then text=$(cat); fi
	printf '%s [%s] [Entrypoint]: %s\n' "$(date --rfc-3339=seconds)" "$level" "$text"
}
note() { entry_log Note "$@"; }
warn() { entry_log Warn "$@" >&2; }
fatal() {
	entry_log ERROR "$@" >&2
	exit 1
}

# --- environment and configuration ---------------------------------------------------------

# read_env NAME [DEFAULT]: exports NAME from $NAME, else from the file named by $NAME_FILE,
# else DEFAULT; setting both NAME and NAME_FILE is an error.
read_env() {
	local name=$1 file_name="${1}_FILE" value="${2:-}"
	if [ -n "${!name:-}" ] && [ -n "${!file_name:-}" ]; then
		fatal "Both $name and $file_name are set (but are exclusive)"
	fi
	if [ -n "${!name:-}" ]; then
		value=${!name}
	elif [ -n "${!file_name:-}" ]; then
		value=$(<"${!file_name}")
	fi
	export "$name=$value"
	unset "$file_name"
}

# true when this file is sourced (by a test, or by an init script's author) rather than run
is_sourced() {
	[ "${#FUNCNAME[@]}" -ge 2 ] && [ "${FUNCNAME[0]}" = is_sourced ] && [ "${FUNCNAME[1]}" = source ]
}

# true when an argument makes mysqld print something and stop: no setup for those
wants_help() {
	local arg
	for arg; do
		case $arg in
			-'?' | --help | --print-defaults | -V | --version) return 0 ;;
		esac
	done
	return 1
}

# mysqld's own help run: a throw-away --log-bin-index keeps it from touching a real index
# (the official image passes the same, for docker-library/mysql#136)
server_help() {
	"$@" --verbose --help --log-bin-index="$(mktemp -u)"
}

# fails with the server's message when its configuration (files + arguments) is invalid.
# As upstream, through --verbose --help: 9.7's exits 0 despite an unknown option, which then
# stops --initialize half-way, leaving a mysql/ directory (see setup_env). Not fixed here.
check_config() {
	local errors
	if ! errors=$(server_help "$@" 2>&1 >/dev/null); then
		fatal $'mysqld failed while attempting to check config\n\tcommand was: '"$* --verbose --help"$'\n\t'"$errors"
	fi
}

# config_value OPTION SERVER-ARGS...: the value the server would use for OPTION (the whole
# help is read: stopping early would kill mysqld with SIGPIPE under pipefail)
config_value() {
	local option=$1
	shift
	server_help "$@" 2>/dev/null \
		| awk -v opt="$option" '!done && $1 == opt && /^[^ \t]/ { sub(/^[^ \t]+[ \t]+/, ""); print; done = 1 }'
}

# DATADIR, SOCKET and every MYSQL_* variable, and whether the data directory is initialised
setup_env() {
	DATADIR=$(config_value datadir "$@")
	DATADIR=${DATADIR%/}
	SOCKET=$(config_value socket "$@")
	export DATADIR SOCKET

	read_env MYSQL_ROOT_HOST '%'
	read_env MYSQL_DATABASE
	read_env MYSQL_USER
	read_env MYSQL_PASSWORD
	read_env MYSQL_ROOT_PASSWORD
	read_env MYSQL_ALLOW_EMPTY_PASSWORD
	read_env MYSQL_RANDOM_ROOT_PASSWORD
	read_env MYSQL_ONETIME_PASSWORD
	read_env MYSQL_INITDB_SKIP_TZINFO

	# Reproduced on purpose: the mysql/ schema directory alone means "initialised", even
	# when the initialisation that created it stopped half-way (no marker file, no wipe).
	ALREADY_INITIALISED=
	if [ -d "$DATADIR/mysql" ]; then
		ALREADY_INITIALISED=true
	fi
}

# the directories the server writes to: data, socket, pid file, logs, keyring, secure-file-priv
server_dirs() {
	local option value
	echo "$DATADIR"
	dirname "$SOCKET"
	for option in general-log-file keyring_file_data pid-file secure-file-priv slow-query-log-file; do
		value=$(config_value "$option" "$@")
		if [ -z "$value" ] || [ "$value" = NULL ]; then continue; fi
		# secure-file-priv names a directory, the others a file
		if [ "$option" = secure-file-priv ]; then echo "$value"; else dirname "$value"; fi
	done
}

# creates the server's directories; as root, gives mysql what it does not own yet
create_dirs() {
	local dirs=()
	mapfile -t dirs < <(server_dirs "$@" | sort -u)
	mkdir -p "${dirs[@]}"
	if [ "$(id -u)" = 0 ]; then
		# only what is not mysql's yet: cheap on a large, already initialised data directory
		find "${dirs[@]}" \! -user mysql -exec chown --no-dereference mysql '{}' +
	fi
}

# Before the switch to mysql: that user must be able to enter /. A runtime running with
# umask 077 creates / as 0700, and then every program started as mysql fails to load its
# libraries. (Not in the official entrypoint; this local cluster once did exactly that.)
check_root_dir() {
	local mode
	mode=$(stat -c %a /)
	if [ $((8#$mode & 1)) -eq 0 ]; then
		warn "/ has mode $mode, other users cannot enter it: making it 755"
		chmod 0755 / || fatal "cannot chmod / (read-only root filesystem?): start the container runtime with umask 022"
	fi
}

# the settings a first start needs, and the ones that would make it fail half-way
verify_minimum_env() {
	if [ -z "$MYSQL_ROOT_PASSWORD" ] && [ -z "$MYSQL_ALLOW_EMPTY_PASSWORD" ] && [ -z "$MYSQL_RANDOM_ROOT_PASSWORD" ]; then
		fatal <<-'EOF'
			Database is uninitialized and password option is not specified
			    You need to specify one of the following as an environment variable:
			    - MYSQL_ROOT_PASSWORD
			    - MYSQL_ALLOW_EMPTY_PASSWORD
			    - MYSQL_RANDOM_ROOT_PASSWORD
		EOF
	fi
	if [ "$MYSQL_USER" = root ]; then
		fatal <<-'EOF'
			MYSQL_USER="root", MYSQL_USER and MYSQL_PASSWORD are for configuring a regular user and cannot be used for the root user
			    Remove MYSQL_USER="root" and use one of the following to control the root user password:
			    - MYSQL_ROOT_PASSWORD
			    - MYSQL_ALLOW_EMPTY_PASSWORD
			    - MYSQL_RANDOM_ROOT_PASSWORD
		EOF
	fi
	if [ -n "$MYSQL_USER" ] && [ -z "$MYSQL_PASSWORD" ]; then
		warn 'MYSQL_USER specified, but missing MYSQL_PASSWORD; MYSQL_USER will not be created'
	elif [ -z "$MYSQL_USER" ] && [ -n "$MYSQL_PASSWORD" ]; then
		warn 'MYSQL_PASSWORD specified, but missing MYSQL_USER; MYSQL_PASSWORD will be ignored'
	fi
}

# --- SQL -------------------------------------------------------------------------------------

# The [client] option file with the root password, handed to a client on a pipe (the
# callers pass -uroot). Reproduced on purpose, as the official image's 9.7 entrypoint
# writes it: password="<pw>", the value in double quotes and nothing escaped, so a
# password holding a double quote or a backslash is read as another value.
root_option_file() {
	if [ "${1:-}" = --dont-use-mysql-root-password ] || [ -z "$MYSQL_ROOT_PASSWORD" ]; then
		return 0
	fi
	printf '[client]\npassword="%s"\n' "$MYSQL_ROOT_PASSWORD"
}

# run_sql [--dont-use-mysql-root-password] [CLIENT-ARGS...] < SQL: runs SQL as root on the
# temporary server's socket, in MYSQL_DATABASE unless CLIENT-ARGS name another database
run_sql() {
	local option_args=()
	if [ "${1:-}" = --dont-use-mysql-root-password ]; then
		option_args=("$1")
		shift
	fi
	if [ -n "$MYSQL_DATABASE" ]; then
		set -- --database="$MYSQL_DATABASE" "$@"
	fi
	mysql --defaults-extra-file=<(root_option_file "${option_args[@]}") \
		--protocol=socket -uroot -hlocalhost --socket="$SOCKET" --comments "$@"
}

# time zone tables, root accounts, MYSQL_DATABASE and MYSQL_USER, on the temporary server
setup_db() {
	if [ -z "$MYSQL_INITDB_SKIP_TZINFO" ]; then
		note "Loading time zone tables"
		# the sed renames the zone zic writes for "Local time zone must be set" (MySQL bug 20545)
		mysql_tzinfo_to_sql /usr/share/zoneinfo \
			| sed 's/Local time zone must be set--see zic manual page/FCTY/' \
			| run_sql --dont-use-mysql-root-password --database=mysql
	fi

	if [ -n "$MYSQL_RANDOM_ROOT_PASSWORD" ]; then
		MYSQL_ROOT_PASSWORD=$(head -c 24 /dev/urandom | base64)
		export MYSQL_ROOT_PASSWORD
		note "GENERATED ROOT PASSWORD: $MYSQL_ROOT_PASSWORD"
	fi

	# Reproduced on purpose: the values are pasted into the SQL as they are, not escaped.
	# A single quote in a password makes the first statement below a syntax error; set -e
	# then ends the script with root@localhost still password-less (see setup_env).
	local root_remote=
	if [ -n "$MYSQL_ROOT_HOST" ] && [ "$MYSQL_ROOT_HOST" != localhost ]; then
		root_remote="CREATE USER 'root'@'${MYSQL_ROOT_HOST}' IDENTIFIED BY '${MYSQL_ROOT_PASSWORD}' ;
GRANT ALL ON *.* TO 'root'@'${MYSQL_ROOT_HOST}' WITH GRANT OPTION ;"
	fi
	note "Setting the root password and creating root@${MYSQL_ROOT_HOST}"
	run_sql --dont-use-mysql-root-password --database=mysql <<-EOSQL
		-- autocommit even if a configuration turned it off
		SET autocommit = 1;
		-- none of this belongs in the binary log: no replica should replay it
		SET @@SESSION.SQL_LOG_BIN = 0;
		ALTER USER 'root'@'localhost' IDENTIFIED BY '${MYSQL_ROOT_PASSWORD}' ;
		GRANT ALL ON *.* TO 'root'@'localhost' WITH GRANT OPTION ;
		FLUSH PRIVILEGES ;
		${root_remote}
		DROP DATABASE IF EXISTS test ;
	EOSQL

	if [ -n "$MYSQL_DATABASE" ]; then
		note "Creating database ${MYSQL_DATABASE}"
		# reproduced on purpose: the name is not escaped (a backtick in it breaks the SQL)
		run_sql --database=mysql <<<"CREATE DATABASE IF NOT EXISTS \`${MYSQL_DATABASE}\` ;"
	fi

	if [ -n "$MYSQL_USER" ] && [ -n "$MYSQL_PASSWORD" ]; then
		note "Creating user ${MYSQL_USER}"
		# reproduced on purpose: user name and password pasted in unescaped
		run_sql --database=mysql <<<"CREATE USER '${MYSQL_USER}'@'%' IDENTIFIED BY '${MYSQL_PASSWORD}' ;"
		if [ -n "$MYSQL_DATABASE" ]; then
			note "Giving user ${MYSQL_USER} access to schema ${MYSQL_DATABASE}"
			# as upstream: only _ is escaped (a GRANT's database name is a pattern), % is not
			run_sql --database=mysql <<<"GRANT ALL ON \`${MYSQL_DATABASE//_/\\_}\`.* TO '${MYSQL_USER}'@'%' ;"
		fi
	fi
}

# MYSQL_ONETIME_PASSWORD: root@% must choose a new password on its first login. As upstream,
# only 'root'@'%' (the default MYSQL_ROOT_HOST); root@localhost keeps its password valid so
# that the entrypoint can still shut the temporary server down.
expire_root() {
	if [ -n "$MYSQL_ONETIME_PASSWORD" ]; then
		run_sql --database=mysql <<<"ALTER USER 'root'@'%' PASSWORD EXPIRE;"
	fi
}

# run_init_files FILE...: runs the init scripts by their extension, in the order given
run_init_files() {
	# "${mysql[@]}" is what older init scripts call to run SQL: keep it working
	# shellcheck disable=SC2034 # used by sourced init scripts
	mysql=(run_sql)
	echo
	local f
	for f; do
		case $f in
			*.sh)
				if [ -x "$f" ]; then
					note "$0: running $f"
					"$f"
				else
					note "$0: sourcing $f"
					# shellcheck disable=SC1090 # the user's script
					. "$f"
				fi
				;;
			*.sql) note "$0: running $f"; run_sql <"$f"; echo ;;
			*.sql.gz) note "$0: running $f"; gunzip -c "$f" | run_sql; echo ;;
			*.sql.bz2) note "$0: running $f"; bunzip2 -c "$f" | run_sql; echo ;;
			*.sql.xz) note "$0: running $f"; xzcat "$f" | run_sql; echo ;;
			*.sql.zst) note "$0: running $f"; zstd -dc "$f" | run_sql; echo ;;
			*) warn "$0: ignoring $f" ;;
		esac
		echo
	done
}

# --- the temporary server ----------------------------------------------------------------

# Reproduced on purpose: mysqld --initialize-insecure (root@localhost without a password
# until setup_db sets one), with the server arguments.
init_datadir() {
	note "Initializing database files"
	"$@" --initialize-insecure --default-time-zone=SYSTEM
	note "Database files initialized"
}

# Reproduced on purpose: --daemonize returns once the server accepts connections, and
# --skip-networking keeps TCP 3306 closed until the initialisation is complete.
temp_server_start() {
	note "Starting temporary server"
	if ! "$@" --daemonize --skip-networking --default-time-zone=SYSTEM --socket="$SOCKET"; then
		fatal "Unable to start server."
	fi
	note "Temporary server started."
}

# Reproduced on purpose: mysqladmin shutdown authenticated by the unquoted option file;
# over the socket it returns once the server has stopped. (-uroot too: with an empty
# password there is no option file, and the client would log in as the OS user mysql.)
temp_server_stop() {
	note "Stopping temporary server"
	if ! mysqladmin --defaults-extra-file=<(root_option_file) -uroot shutdown --socket="$SOCKET"; then
		fatal "Unable to shut down server."
	fi
	note "Temporary server stopped"
}

# Clients that only know the compiled-in socket path (mysqlsh --mysql ignores [client])
# still find the server: a symlink there, unless both names are the same file already
# (here /var/run is /run: a symlink would replace the socket itself).
link_default_socket() {
	local compiled
	compiled=$(config_value socket mysqld --no-defaults)
	if [ -z "$compiled" ]; then return 0; fi
	if [ "$(readlink -m "$(dirname "$compiled")")/$(basename "$compiled")" != "$(readlink -m "$(dirname "$SOCKET")")/$(basename "$SOCKET")" ]; then
		ln -sfTv "$SOCKET" "$compiled" || :
	fi
}

# --- main ----------------------------------------------------------------------------------

# first start: initialise the data directory, set up accounts and data, run the init files
first_start() {
	verify_minimum_env
	# unreadable init files should fail now, not after the data directory exists
	ls /docker-entrypoint-initdb.d/ >/dev/null
	init_datadir "$@"
	temp_server_start "$@"
	link_default_socket
	setup_db
	run_init_files /docker-entrypoint-initdb.d/*
	expire_root
	temp_server_stop
	echo
	note "MySQL init process done. Ready for start up."
	echo
}

main() {
	# `docker run image --some-option`: options for the server
	if [ "${1:0:1}" = - ]; then
		set -- mysqld "$@"
	fi

	if [ "$1" = mysqld ] && ! wants_help "$@"; then
		note "Entrypoint script for MySQL Server ${MYSQL_VERSION:-$(mysqld --version | awk '{print $3}')} started."
		check_config "$@"
		setup_env "$@"
		create_dirs "$@"

		# reproduced on purpose: as root, run all of this again (and the server) as mysql
		if [ "$(id -u)" = 0 ]; then
			check_root_dir
			note "Switching to dedicated user 'mysql'"
			exec gosu mysql "${BASH_SOURCE[0]}" "$@"
		fi

		if [ -z "$ALREADY_INITIALISED" ]; then
			first_start "$@"
		else
			link_default_socket
		fi
	fi
	exec "$@"
}

if ! is_sourced; then
	main "$@"
fi
