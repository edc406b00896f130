# Sourced by the package scripts: package_field DIR FIELD prints the words of FIELD in the
# onebit_kernel_package() call of DIR/CMakeLists.txt (one field a line there, "  FIELD a b c").
package_field() { sed -n "s/^ *$2 //p" "$1/CMakeLists.txt"; }
