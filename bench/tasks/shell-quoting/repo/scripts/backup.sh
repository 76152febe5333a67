#!/usr/bin/env bash
# Copies DIR/*.txt to DIR/backup/NAME.txt.bak and prints how many were copied.
set -eu
dir=$1
mkdir -p $dir/backup
count=0
for file in $(ls $dir/*.txt 2>/dev/null); do
    cp $file $dir/backup/$(basename $file).bak
    count=$((count + 1))
done
echo "backed up $count files"
