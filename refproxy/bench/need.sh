# need CMD PKG: installs Debian package PKG with apt-get unless CMD is on the
# PATH (sourced by the bench scripts; a fresh machine has no package lists yet).
need() {
	command -v "$1" >/dev/null 2>&1 && return
	echo "installing $2 (Debian package)" >&2
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get install -y "$2" >/dev/null 2>&1 || { $sudo apt-get update -qq && $sudo apt-get install -y "$2" >/dev/null; }
}
