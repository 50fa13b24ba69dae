#!/bin/bash
# Entrypoint of the localhost/mariadb:10.11-bookworm image (Debian's MariaDB packages, built
# without Docker by cluster/images/build.sh). It honours the environment contract of the
# official `mysql` Docker image, so manifests written for mysql:5.7/8 work unchanged:
#
#   MYSQL_ROOT_PASSWORD        root password (required on first start unless one of the next two)
#   MYSQL_ALLOW_EMPTY_PASSWORD any non-empty value: root gets an empty password
#   MYSQL_RANDOM_ROOT_PASSWORD any non-empty value: a random root password, printed to stdout
#   MYSQL_ROOT_HOST            host part of the extra root account (default %, i.e. any host)
#   MYSQL_DATABASE             database created on first start
#   MYSQL_USER/MYSQL_PASSWORD  account created on first start, ALL on MYSQL_DATABASE
#   MYSQL_ONETIME_PASSWORD     any non-empty value: root@MYSQL_ROOT_HOST must change its password
#   MYSQL_INITDB_SKIP_TZINFO   any non-empty value: do not load the time zone tables
#   each of the above also as <NAME>_FILE (read from that file, e.g. a mounted Secret)
#
# On a data directory without a database (no mysql/ system schema) it runs mariadb-install-db,
# starts a temporary server with --skip-networking (so that port 3306 opens only once the
# initialisation is complete: TCP readiness probes rely on that), sets up the accounts, runs
# /docker-entrypoint-initdb.d/*.sh, *.sql, *.sql.gz|xz|bz2|zst in name order, stops the
# temporary server, and finally execs the server in the foreground as user mysql. A data
# directory whose initialisation was interrupted is wiped and initialised again.
set -eo pipefail
shopt -s nullglob

# marks a data directory whose initialisation has not finished (removed at the end of it)
INIT_MARKER=.docker-entrypoint-init-incomplete

# --- logging -----------------------------------------------------------------------------
mysql_log() {
	local type="$1"; shift
	local text="$*"
	if [ "$#" -eq 0 ]; then text="$(cat)"; fi
	printf '%s [%s] [Entrypoint]: %s\n' "$(date --rfc-3339=seconds)" "$type" "$text"
}
mysql_note() { mysql_log Note "$@"; }
mysql_warn() { mysql_log Warn "$@" >&2; }
mysql_error() {
	mysql_log ERROR "$@" >&2
	exit 1
}

# --- helpers -----------------------------------------------------------------------------

# file_env VAR [DEFAULT]: sets and exports VAR from $VAR, else from the file named by
# $VAR_FILE, else DEFAULT; VAR and VAR_FILE are exclusive.
file_env() {
	local var="$1" fileVar="${1}_FILE" def="${2:-}"
	if [ -n "${!var:-}" ] && [ -n "${!fileVar:-}" ]; then
		mysql_error "Both $var and $fileVar are set (but are exclusive)"
	fi
	local val="$def"
	if [ -n "${!var:-}" ]; then
		val="${!var}"
	elif [ -n "${!fileVar:-}" ]; then
		val="$(< "${!fileVar}")"
	fi
	export "$var"="$val"
	unset "$fileVar"
}

# true when this file is sourced (e.g. by a test) rather than executed
_is_sourced() {
	[ "${#FUNCNAME[@]}" -ge 2 ] \
		&& [ "${FUNCNAME[0]}" = '_is_sourced' ] \
		&& [ "${FUNCNAME[1]}" = 'source' ]
}

# true when the server arguments only ask for help or the version
_mysql_want_help() {
	local arg
	for arg; do
		case "$arg" in
			-'?'|--help|--print-defaults|-V|--version) return 0 ;;
		esac
	done
	return 1
}

# fails with the server's own message when its configuration (files + arguments) is invalid
mysql_check_config() {
	local toRun=("$@" --verbose --help) errors
	if ! errors="$("${toRun[@]}" 2>&1 >/dev/null)"; then
		mysql_error $'mariadbd failed while attempting to check config\n\tcommand was: '"${toRun[*]}"$'\n\t'"$errors"
	fi
}

# mysql_get_config OPTION SERVER-ARGS...: the value the server would use for OPTION
# (reads all of the help output: stopping early would kill the server with SIGPIPE)
mysql_get_config() {
	local conf="$1"; shift
	"$@" --verbose --help 2>/dev/null \
		| awk -v conf="$conf" '!found && $1 == conf && /^[^ \t]/ { sub(/^[^ \t]+[ \t]+/, ""); print; found = 1 }'
}

# escapes a value for use inside a single-quoted SQL string literal
docker_sql_escape_string_literal() {
	local newline=$'\n'
	local escaped=${1//\\/\\\\}
	escaped="${escaped//$newline/\\n}"
	echo "${escaped//\'/\\\'}"
}

# escapes a value for use inside a backtick-quoted SQL identifier
docker_sql_escape_identifier() {
	echo "${1//\`/\`\`}"
}

mysql_genpass() {
	head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | cut -c1-32
}

# the [client] option file with the root password, given to the client on a pipe
_mysql_passfile() {
	if [ '--dont-use-mysql-root-password' != "${1:-}" ] && [ -n "$MYSQL_ROOT_PASSWORD" ]; then
		local pw=${MYSQL_ROOT_PASSWORD//\\/\\\\}
		pw=${pw//\"/\\\"}
		printf '[client]\npassword="%s"\n' "$pw"
	fi
}

# docker_process_sql [--dont-use-mysql-root-password] [CLIENT-ARGS...] < SQL: runs SQL as
# root on the temporary server's socket, in MYSQL_DATABASE unless CLIENT-ARGS name another
docker_process_sql() {
	local passfileArgs=()
	if [ '--dont-use-mysql-root-password' = "${1:-}" ]; then
		passfileArgs+=("$1")
		shift
	fi
	if [ -n "$MYSQL_DATABASE" ]; then
		set -- --database="$MYSQL_DATABASE" "$@"
	fi
	mariadb --defaults-extra-file=<(_mysql_passfile "${passfileArgs[@]}") \
		--protocol=socket -uroot -hlocalhost --socket="$SOCKET" --comments "$@"
}

# --- steps -------------------------------------------------------------------------------

docker_setup_env() {
	DATADIR="$(mysql_get_config 'datadir' "$@")"
	DATADIR="${DATADIR%/}"
	: "${DATADIR:=/var/lib/mysql}"
	SOCKET="$(mysql_get_config 'socket' "$@")"
	: "${SOCKET:=/run/mysqld/mysqld.sock}"
	export DATADIR SOCKET

	file_env 'MYSQL_ROOT_HOST' '%'
	file_env 'MYSQL_DATABASE'
	file_env 'MYSQL_USER'
	file_env 'MYSQL_PASSWORD'
	file_env 'MYSQL_ROOT_PASSWORD'
	file_env 'MYSQL_ALLOW_EMPTY_PASSWORD'
	file_env 'MYSQL_RANDOM_ROOT_PASSWORD'
	file_env 'MYSQL_ONETIME_PASSWORD'
	file_env 'MYSQL_INITDB_SKIP_TZINFO'

	DATABASE_ALREADY_EXISTS=
	if [ -d "$DATADIR/mysql" ] && [ ! -e "$DATADIR/$INIT_MARKER" ]; then
		DATABASE_ALREADY_EXISTS=true
	fi
}

# creates the data and socket directories; as root, hands them to the mysql user
docker_create_db_directories() {
	local socketDir
	socketDir="$(dirname "$SOCKET")"
	mkdir -p "$DATADIR" "$socketDir"
	if [ "$(id -u)" = 0 ]; then
		# only what is not mysql's yet: cheap on a large, already initialised data directory
		find "$DATADIR" \! -user mysql -exec chown mysql:mysql '{}' +
		chown mysql:mysql "$socketDir"
	fi
}

# Before the switch to mysql: that user must be able to enter /. A container runtime running
# with umask 077 creates the root directory 0700, and then every program started as mysql
# dies with "error while loading shared libraries: ...: Permission denied".
docker_check_root_dir() {
	local mode
	mode="$(stat -c %a /)"
	if [ $((8#$mode & 1)) -eq 0 ]; then
		mysql_warn "/ has mode $mode, other users cannot enter it (container runtime running with umask 077?): making it 755"
		chmod 0755 / || mysql_error "cannot chmod / (read-only root filesystem?): start the container runtime with umask 022"
	fi
}

docker_verify_minimum_env() {
	if [ -z "$MYSQL_ROOT_PASSWORD" ] && [ -z "$MYSQL_ALLOW_EMPTY_PASSWORD" ] && [ -z "$MYSQL_RANDOM_ROOT_PASSWORD" ]; then
		mysql_error $'Database is uninitialized and password option is not specified\n\tYou need to specify one of the following as an environment variable:\n\t- MYSQL_ROOT_PASSWORD\n\t- MYSQL_ALLOW_EMPTY_PASSWORD\n\t- MYSQL_RANDOM_ROOT_PASSWORD'
	fi
	if [ "$MYSQL_USER" = 'root' ]; then
		mysql_error $'MYSQL_USER="root", MYSQL_USER and MYSQL_PASSWORD are for configuring a regular user and cannot be used for the root user\n\tRemove MYSQL_USER="root" and use one of the following to control the root user password:\n\t- MYSQL_ROOT_PASSWORD\n\t- MYSQL_ALLOW_EMPTY_PASSWORD\n\t- MYSQL_RANDOM_ROOT_PASSWORD'
	fi
	if [ -n "$MYSQL_USER" ] && [ -z "$MYSQL_PASSWORD" ]; then
		mysql_warn 'MYSQL_USER specified, but missing MYSQL_PASSWORD; MYSQL_USER will not be created'
	elif [ -z "$MYSQL_USER" ] && [ -n "$MYSQL_PASSWORD" ]; then
		mysql_warn 'MYSQL_PASSWORD specified, but missing MYSQL_USER; MYSQL_PASSWORD will be ignored'
	fi
}

# wipes a data directory left behind by an interrupted initialisation (keeps lost+found)
docker_discard_incomplete_init() {
	if [ -e "$DATADIR/$INIT_MARKER" ]; then
		mysql_warn "$DATADIR holds an interrupted initialisation: discarding it and starting over"
		find "$DATADIR" -mindepth 1 -maxdepth 1 \! -name lost+found -exec rm -rf '{}' +
	fi
}

docker_init_database_dir() {
	mysql_note "Initializing database files"
	touch "$DATADIR/$INIT_MARKER"
	# --cross-bootstrap: no root@<this hostname> (a pod's name is no client's address) and
	# no "remember to set a password" banner; "${@:2}": the server arguments apply too
	mariadb-install-db --datadir="$DATADIR" --rpm --cross-bootstrap --auth-root-authentication-method=normal \
		--skip-test-db --default-time-zone=SYSTEM --skip-log-bin --expire-logs-days=0 \
		--loose-innodb_buffer_pool_load_at_startup=0 --loose-innodb_buffer_pool_dump_at_shutdown=0 \
		"${@:2}"
	mysql_note "Database files initialized"
}

# starts the server without TCP (socket only) and waits until it answers
docker_temp_server_start() {
	"$@" --skip-networking --default-time-zone=SYSTEM --socket="$SOCKET" --wsrep_on=OFF \
		--expire-logs-days=0 --skip-slave-start --loose-innodb_buffer_pool_load_at_startup=0 &
	MYSQL_TEMP_PID=$!
	mysql_note "Waiting for server startup"
	local i
	for i in {60..0}; do
		if docker_process_sql --dont-use-mysql-root-password --database=mysql <<<'SELECT 1' &>/dev/null; then
			break
		fi
		if ! kill -0 "$MYSQL_TEMP_PID" 2>/dev/null; then
			mysql_error "Unable to start server (it exited, see its messages above)."
		fi
		sleep 1
	done
	if [ "$i" = 0 ]; then
		mysql_error "Unable to start server (no answer on $SOCKET after 60 s)."
	fi
	mysql_note "Temporary server started."
}

docker_temp_server_stop() {
	mysql_note "Stopping temporary server"
	kill "$MYSQL_TEMP_PID"
	wait "$MYSQL_TEMP_PID"
	mysql_note "Temporary server stopped"
}

# root accounts, database and user, on the temporary server
docker_setup_db() {
	if [ -z "$MYSQL_INITDB_SKIP_TZINFO" ] && [ -d /usr/share/zoneinfo ]; then
		mysql_note "Loading time zone tables"
		mariadb-tzinfo-to-sql --skip-write-binlog /usr/share/zoneinfo 2>/dev/null \
			| docker_process_sql --dont-use-mysql-root-password --database=mysql
	fi

	if [ -n "$MYSQL_RANDOM_ROOT_PASSWORD" ]; then
		MYSQL_ROOT_PASSWORD="$(mysql_genpass)"
		export MYSQL_ROOT_PASSWORD
		mysql_note "GENERATED ROOT PASSWORD: $MYSQL_ROOT_PASSWORD"
	fi

	# mariadb-install-db also made root@127.0.0.1 and root@::1: keep only
	# root@localhost (socket) and root@MYSQL_ROOT_HOST (TCP), both with the password
	local host dropOtherRoots=
	while IFS= read -r host; do
		dropOtherRoots+="DROP USER 'root'@${host};"$'\n'
	done < <(docker_process_sql --dont-use-mysql-root-password --database=mysql -N -B \
		-e "SELECT QUOTE(Host) FROM mysql.global_priv WHERE User = 'root' AND Host <> 'localhost'")

	local rootPassword rootHost rootCreate=
	rootPassword="$(docker_sql_escape_string_literal "$MYSQL_ROOT_PASSWORD")"
	rootHost="$(docker_sql_escape_string_literal "$MYSQL_ROOT_HOST")"
	if [ -n "$MYSQL_ROOT_HOST" ] && [ "$MYSQL_ROOT_HOST" != 'localhost' ]; then
		read -r -d '' rootCreate <<-EOSQL || true
			CREATE USER 'root'@'${rootHost}' IDENTIFIED BY '${rootPassword}';
			GRANT ALL ON *.* TO 'root'@'${rootHost}' WITH GRANT OPTION;
			GRANT PROXY ON ''@'%' TO 'root'@'${rootHost}' WITH GRANT OPTION;
		EOSQL
	fi

	local expire=
	if [ -n "$MYSQL_ONETIME_PASSWORD" ]; then
		expire="ALTER USER 'root'@'localhost' PASSWORD EXPIRE;"
		if [ -n "$rootCreate" ]; then
			expire+=" ALTER USER 'root'@'${rootHost}' PASSWORD EXPIRE;"
		fi
	fi

	mysql_note "Securing system users"
	# the user SQL is not written to the binary log (no replica should replay it)
	docker_process_sql --dont-use-mysql-root-password --database=mysql <<-EOSQL
		SET @@SESSION.SQL_LOG_BIN=0;
		SET @@SESSION.SQL_MODE=REPLACE(@@SESSION.SQL_MODE, 'NO_BACKSLASH_ESCAPES', '');
		${dropOtherRoots}
		ALTER USER 'root'@'localhost' IDENTIFIED BY '${rootPassword}';
		${rootCreate}
		DROP DATABASE IF EXISTS test;
		${expire}
	EOSQL

	if [ -n "$MYSQL_DATABASE" ]; then
		mysql_note "Creating database ${MYSQL_DATABASE}"
		docker_process_sql --database=mysql \
			<<<"SET @@SESSION.SQL_LOG_BIN=0; CREATE DATABASE IF NOT EXISTS \`$(docker_sql_escape_identifier "$MYSQL_DATABASE")\`;"
	fi

	if [ -n "$MYSQL_USER" ] && [ -n "$MYSQL_PASSWORD" ]; then
		local user password grant=
		user="$(docker_sql_escape_string_literal "$MYSQL_USER")"
		password="$(docker_sql_escape_string_literal "$MYSQL_PASSWORD")"
		if [ -n "$MYSQL_DATABASE" ]; then
			# in GRANT a database name is a pattern: _ and % must not act as wildcards
			local db
			db="$(docker_sql_escape_identifier "$MYSQL_DATABASE")"
			db="${db//_/\\_}"
			db="${db//%/\\%}"
			grant="GRANT ALL ON \`${db}\`.* TO '${user}'@'%';"
		fi
		mysql_note "Creating user ${MYSQL_USER}"
		docker_process_sql --database=mysql <<-EOSQL
			SET @@SESSION.SQL_LOG_BIN=0;
			CREATE USER '${user}'@'%' IDENTIFIED BY '${password}';
			${grant}
		EOSQL
	fi
}

# docker_process_init_files FILE...: runs init scripts like the official image does
docker_process_init_files() {
	echo
	local f
	for f; do
		case "$f" in
			*.sh)
				if [ -x "$f" ]; then
					mysql_note "$0: running $f"
					"$f"
				else
					mysql_note "$0: sourcing $f"
					# shellcheck disable=SC1090
					. "$f"
				fi
				;;
			*.sql) mysql_note "$0: running $f"; docker_process_sql < "$f"; echo ;;
			*.sql.gz) mysql_note "$0: running $f"; gunzip -c "$f" | docker_process_sql; echo ;;
			*.sql.xz) mysql_note "$0: running $f"; xzcat "$f" | docker_process_sql; echo ;;
			*.sql.bz2) mysql_note "$0: running $f"; bunzip2 -c "$f" | docker_process_sql; echo ;;
			*.sql.zst) mysql_note "$0: running $f"; zstd -dc "$f" | docker_process_sql; echo ;;
			*) mysql_warn "$0: ignoring $f" ;;
		esac
	done
}

_main() {
	# `docker run image --some-option`: options for the server
	if [ "${1:0:1}" = '-' ]; then
		set -- mariadbd "$@"
	fi

	if { [ "$1" = 'mariadbd' ] || [ "$1" = 'mysqld' ]; } && ! _mysql_want_help "$@"; then
		mysql_note "Entrypoint script for MariaDB Server $("$1" --version | awk '{print $3}') started."
		mysql_check_config "$@"
		docker_setup_env "$@"
		docker_create_db_directories

		# as root: run the rest of this script (and the server) as the mysql user
		if [ "$(id -u)" = 0 ]; then
			docker_check_root_dir
			mysql_note "Switching to dedicated user 'mysql'"
			exec setpriv --reuid=mysql --regid=mysql --init-groups -- "${BASH_SOURCE[0]}" "$@"
		fi

		if [ -z "$DATABASE_ALREADY_EXISTS" ]; then
			docker_verify_minimum_env
			docker_discard_incomplete_init
			docker_init_database_dir "$@"
			docker_temp_server_start "$@"
			docker_setup_db
			docker_process_init_files /docker-entrypoint-initdb.d/*
			docker_temp_server_stop
			rm -f "$DATADIR/$INIT_MARKER"
			mysql_note "MariaDB init process done. Ready for start up."
			echo
		else
			mysql_note "$DATADIR already holds a database: skipping initialization"
		fi
	fi
	exec "$@"
}

if ! _is_sourced; then
	_main "$@"
fi
