package main

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/spf13/cobra"
)

var imageColumns = []string{"id", "name", "status", "visibility", "owner", "properties"}

func imageRow(im images.Image) []any {
	props := map[string]string{}
	for k, v := range im.Properties {
		if v != nil {
			props[k] = fmt.Sprint(v)
		}
	}
	return []any{im.ID, im.Name, string(im.Status), string(im.Visibility), im.Owner, props}
}

func (a *apiCmd) imageCmd() *cobra.Command {
	c := a.noun("image", "images (Glance v2): list, show")
	list := &cobra.Command{Use: "list", Short: "images", Args: exactArgs()}
	lp := addPrinter(list, a.s, imageColumns...)
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		ims, err := listImages(ctx, cl, images.ListOpts{})
		if err != nil {
			return err
		}
		rows := make([][]any, len(ims))
		for i, im := range ims {
			rows[i] = imageRow(im)
		}
		return lp.list(rows)
	}
	show := &cobra.Command{Use: "show IMAGE", Short: "one image, by name or id", Args: exactArgs("IMAGE")}
	sp := addPrinter(show, a.s, imageColumns...)
	show.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return err
		}
		id, err := findImageID(ctx, cl, args[0])
		if err != nil {
			return err
		}
		sc, err := cl.image(ctx)
		if err != nil {
			return err
		}
		im, err := images.Get(ctx, sc, id).Extract()
		if err != nil {
			return err
		}
		return sp.record(imageRow(*im)...)
	}
	c.AddCommand(list, show)
	return c
}

func listImages(ctx context.Context, cl *cloud, opts images.ListOpts) ([]images.Image, error) {
	sc, err := cl.image(ctx)
	if err != nil {
		return nil, err
	}
	page, err := images.List(sc, opts).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	return images.ExtractImages(page)
}

// findImageID is the image with the id arg, else the one named arg
// (Glance's exact ?name= filter).
func findImageID(ctx context.Context, cl *cloud, arg string) (string, error) {
	if uuidRE.MatchString(arg) {
		sc, err := cl.image(ctx)
		if err != nil {
			return "", err
		}
		im, err := images.Get(ctx, sc, arg).Extract()
		if err == nil {
			return im.ID, nil
		}
		if !gophercloud.ResponseCodeIs(err, 404) {
			return "", err
		}
	}
	ims, err := listImages(ctx, cl, images.ListOpts{Name: arg})
	if err != nil {
		return "", err
	}
	all := make([]named, len(ims))
	for i, im := range ims {
		all[i] = named{im.ID, im.Name}
	}
	return pick("image", arg, all)
}
